"""Write the twins of datasets to files for inspection (``transform=twin``, docs/transforms.md).

    python scripts/write_twins.py                       # the six shipped "seen" datasets
    python scripts/write_twins.py --datasets iris,icu --seed 3 --out /tmp/twins

Each twin is written as ``<dataset>-twin-seed<seed>.csv`` beside ``<same>.json``, the fitted
model's record (hub column, strata, correlations, the twin's and its source's sha256).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tabmem.data import dataset_specs, load_dataset
from tabmem.data.transforms import apply_transform
from tabmem.errors import TabmemError

SEEN = "iris,wine,titanic,openml-diabetes,adult,california-housing"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=SEEN, help="comma-separated (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the run seed (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("outputs/twins"), help="folder")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    specs = dataset_specs()
    for name in [n.strip() for n in args.datasets.split(",") if n.strip()]:
        try:
            if name not in specs:
                raise TabmemError(f"Unknown dataset '{name}'; choose one of: {', '.join(specs)}.")
            twin = apply_transform(load_dataset(specs[name]), {"name": "twin"}, args.seed)
        except TabmemError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        stem = args.out / f"{name}-twin-seed{args.seed}"
        stem.with_suffix(".csv").write_bytes(twin.text.encode("utf-8"))
        record = twin.spec.extra["twin"]
        stem.with_suffix(".json").write_text(json.dumps(record, indent=1), encoding="utf-8")
        print(f"{stem}.csv: {record['rows']} rows, sha256 {record['sha256'][:16]}…")
    return 0


if __name__ == "__main__":
    sys.exit(main())
