"""Write data/synthetic-novel.csv, or with --check verify the shipped file is a fresh generation."""

from __future__ import annotations

import argparse
import sys

from tabmem.data.synthetic import DEFAULT_ROWS, DEFAULT_SEED, generate_synthetic_novel
from tabmem.paths import data_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)

    path = data_dir() / "synthetic-novel.csv"
    fresh = generate_synthetic_novel(args.rows, args.seed).encode("utf-8")
    if args.check:
        if not path.is_file() or path.read_bytes() != fresh:
            print(f"{path} differs from a fresh generation; run scripts/make_synthetic_novel.py")
            return 1
        print(f"{path} matches a fresh generation")
        return 0
    path.write_bytes(fresh)
    print(f"wrote {path} ({args.rows} rows, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
