"""Regenerate the papers' tables and figures from the tracked runs (``make paper-tables``).

    python scripts/paper_tables.py
    python scripts/paper_tables.py --experiment paper --models gpt-4o,oracle-memorizer
    python scripts/paper_tables.py --tracking-uri sqlite:///elsewhere/mlflow.db --out paper/

Reads the MLflow store only; writes Markdown, LaTeX and CSV tables, PNG and PDF figures and an
``index.md`` linking them with the runs they came from (docs/paper-tables.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tabmem.errors import TabmemError
from tabmem.report.paper import write_paper
from tabmem.tracking.store import tracking_uri


def _names(text: str | None) -> list[str] | None:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    return names or None


def check_store(uri: str) -> None:
    """A SQLite store must exist already: reading must not create an empty one."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise TabmemError(
            f"No MLflow store at {uri.removeprefix('sqlite:///')}; run a grid first "
            "(python run.py +grid=paper model=...) or pass --tracking-uri."
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--tracking-uri",
        help="MLflow store to read (default: $MLFLOW_TRACKING_URI, else outputs/mlflow.db)",
    )
    parser.add_argument(
        "--experiment",
        action="append",
        dest="experiments",
        help="MLflow experiment to read; repeat for several (default: all)",
    )
    parser.add_argument(
        "--models",
        help="comma-separated language models to show (default: all; "
        "the baselines are always shown)",
    )
    parser.add_argument(
        "--datasets",
        help="comma-separated dataset rows (default: the paper grid's, then any "
        "other dataset with runs)",
    )
    parser.add_argument(
        "--out", default="outputs/paper", type=Path, help="output folder (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    args.tracking_uri = tracking_uri(args.tracking_uri, Path("outputs"))
    started = time.perf_counter()
    try:
        check_store(args.tracking_uri)
        report = write_paper(
            args.tracking_uri,
            args.out,
            args.experiments,
            _names(args.models),
            _names(args.datasets),
        )
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"{len(report.tables)} tables and {len(report.figures)} figures "
        f"({len(report.files)} files) in {time.perf_counter() - started:.1f}s: {report.index}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
