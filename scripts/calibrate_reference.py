"""Calibrate the tests of rows seen against the reference models, in this process.

    python scripts/calibrate_reference.py                      # negatives: the false positives
    python scripts/calibrate_reference.py --size power         # the partial memorizers' power
    python scripts/calibrate_reference.py --size smoke         # seconds: one file, two tests
    python scripts/calibrate_reference.py --negative-seeds 4 --rests learner --minutes 20
    python scripts/calibrate_reference.py --first-seed 14 --out more/   # 14 seeds more
    python scripts/calibrate_reference.py --from-cells outputs/calibration/reference_cells.csv \
        more/reference_cells.csv                               # the two runs' tables together

Writes reference_cells.csv, reference_dataset_verdicts.csv, reference_fpr.md,
reference_power.md and reference_power.png into --out (outputs/calibration/) and prints the
false-positive table and the time. Sizes: ``tabmem.calibrate.run.SIZES``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]


from tabmem.calibrate import SIZES, calibrate  # noqa: E402
from tabmem.calibrate.run import read_cells, report_console, tabulate  # noqa: E402


def _list(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split(",") if part)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the size they describe, return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = SIZES["negatives"]
    parser.add_argument(
        "--size",
        choices=tuple(SIZES),
        default="negatives",
        help="what to run, before the options below change it (default negatives)",
    )
    parser.add_argument(
        "--negative-seeds",
        type=int,
        help=f"seeds of the negatives ({default.negative_seeds} in size negatives)",
    )
    parser.add_argument(
        "--power-seeds",
        type=int,
        help=f"seeds per share of the power grid ({SIZES['power'].power_seeds} in size power)",
    )
    parser.add_argument(
        "--boundary-seeds",
        type=int,
        help=f"seeds at the boundary shares {', '.join(map(str, SIZES['power'].boundary))} "
        f"({SIZES['power'].boundary_seeds} in size power)",
    )
    parser.add_argument(
        "--first-seed",
        type=int,
        help="the first seed of both grids (default 0): runs with other seeds add up",
    )
    parser.add_argument("--shares", type=_list, help="shares known, comma-separated")
    parser.add_argument(
        "--rests", type=_list, help="rests of the partial memorizer, comma-separated"
    )
    parser.add_argument(
        "--settings", type=_list, help="query settings, comma-separated: default,papers"
    )
    parser.add_argument("--datasets", type=_list, help="files, comma-separated")
    parser.add_argument("--tests", type=_list, help="tests of rows seen, comma-separated")
    parser.add_argument(
        "--negatives",
        type=_list,
        help="negative models, comma-separated (a panel family at a spread: oracle-moments-t0)",
    )
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--minutes",
        type=float,
        default=math.inf,
        help="start no job after this many minutes; the tables count what ran (default: none)",
    )
    parser.add_argument(
        "--from-cells",
        type=Path,
        nargs="+",
        help="write the tables of one or more reference_cells.csv again (a cell that several "
        "hold counted once) instead of running cells",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "outputs" / "calibration", help="output folder"
    )
    args = parser.parse_args(argv)
    if args.from_cells:
        tabulate(read_cells(*args.from_cells), args.out, report_console())
        return 0
    size = SIZES[args.size]
    changes = {
        "negative_seeds": args.negative_seeds,
        "power_seeds": args.power_seeds,
        "boundary_seeds": args.boundary_seeds,
        "first_seed": args.first_seed,
        "shares": tuple(float(s) for s in args.shares) if args.shares else None,
        "rests": args.rests,
        "settings": args.settings,
        "datasets": args.datasets,
        "tests": args.tests,
        "negatives": args.negatives,
    }
    size = replace(size, **{k: v for k, v in changes.items() if v is not None})
    try:
        calibrate(size, args.out, workers=args.workers, minutes=args.minutes)
    except RuntimeError as error:  # a worker died: say where the finished cells are
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
