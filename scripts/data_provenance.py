"""Check data/ against data/provenance.json (exit 1 on any mismatch), or --write to re-measure."""

from __future__ import annotations

import argparse
import sys

from tabmem.data.provenance import (
    JSON_NAME,
    MARKDOWN_NAME,
    check,
    config_delimiters,
    dump_provenance,
    load_provenance,
    refresh,
    render_markdown,
)
from tabmem.paths import data_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"re-measure sha256/rows/columns into {JSON_NAME} and regenerate {MARKDOWN_NAME}",
    )
    args = parser.parse_args(argv)

    directory = data_dir()
    provenance = load_provenance(directory / JSON_NAME)
    delimiters = config_delimiters()
    if args.write:
        provenance = refresh(provenance, directory, delimiters)
        (directory / JSON_NAME).write_text(dump_provenance(provenance), encoding="utf-8")
        (directory / MARKDOWN_NAME).write_text(render_markdown(provenance), encoding="utf-8")
        print(f"wrote {JSON_NAME} and {MARKDOWN_NAME} for {len(provenance.files)} files")
        return 0
    problems = check(provenance, directory, delimiters)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"ok: {len(provenance.files)} files match {JSON_NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
