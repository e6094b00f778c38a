"""Write the calibration table from the tracked runs (``make calibrate``, docs/calibration.md).

    python scripts/calibration_table.py
    python scripts/calibration_table.py --tracking-uri sqlite:///elsewhere/mlflow.db --out cal/

Reads the ``calibrate`` experiment and the contamination lab's experiments (``lab-*``) where
the store has them; writes ``calibration.md`` / ``.csv`` (rates of the tests of rows seen),
``calibration_groups.*`` (per group of cells) and ``calibration_cells.csv`` (every cell).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tabmem.errors import TabmemError
from tabmem.report.calibration import write_calibration
from tabmem.tracking.store import tracking_uri


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tracking-uri",
        help="MLflow store to read (default: $MLFLOW_TRACKING_URI, else outputs/mlflow.db)",
    )
    parser.add_argument(
        "--out",
        default="outputs/calibration",
        type=Path,
        help="output folder (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    args.tracking_uri = tracking_uri(args.tracking_uri, Path("outputs"))
    try:
        written = write_calibration(args.tracking_uri, args.out)
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print((args.out / "calibration.md").read_text(encoding="utf-8"))
    print(f"Written: {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
