"""Rescore a folder of the papers' published answers and set each result beside the paper's mark
(``make rescore-published RESULTS=...``; docs/published-answers.md).

    python scripts/rescore_published.py PATH/TO/tool/results
        [--data spaceship-titanic=train.csv] [--data fico=heloc_dataset_v1.csv]
        [--outputs-dir outputs] [--experiment published] [--out outputs/published] [--force]

Logs one MLflow run per file and test (a file rescored before is read back), prints the
summary, and writes ``published-answers.md`` and ``published-answers.csv`` under ``--out``:
count, baseline, p-value and verdict per model, dataset and test, the paper's mark, and a flag
where they disagree.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from tabmem.errors import TabmemError
from tabmem.report.writers import markdown
from tabmem.rescore.cli import data_paths, summary
from tabmem.rescore.folder import folder_dataset_verdicts, rescore_folder
from tabmem.rescore.marks import PaperMarks, comparison, dataset_comparison, default_marks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the published results/ folder (or its parent)")
    parser.add_argument("--data", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--mapping", type=Path, help="folder mapping (conf/rescore/published.yaml)")
    parser.add_argument("--marks", type=Path, help="paper marks (conf/rescore/paper-marks.yaml)")
    parser.add_argument("--outputs-dir", type=Path, default=Path("outputs"))
    parser.add_argument("--experiment", default="published", help="MLflow experiment")
    parser.add_argument("--out", type=Path, help="default: <outputs-dir>/published")
    parser.add_argument("--force", action="store_true", help="log again files rescored before")
    args = parser.parse_args(argv)
    try:
        marks = PaperMarks.load(args.marks or default_marks())
        outcomes = rescore_folder(
            args.folder,
            mapping_path=args.mapping,
            data_paths=data_paths(args.data),
            experiment=args.experiment,
            outputs_dir=args.outputs_dir,
            force=args.force,
        )
        verdicts = folder_dataset_verdicts(outcomes, args.experiment, args.outputs_dir)
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = args.out or args.outputs_dir / "published"
    out.mkdir(parents=True, exist_ok=True)
    print(summary(outcomes), end="")
    for table in (comparison(outcomes, marks), dataset_comparison(verdicts, outcomes, marks)):
        (out / f"{table.name}.md").write_text(markdown(table), encoding="utf-8")
        table.frame.to_csv(out / f"{table.name}.csv", index=False)
        flagged = int((table.frame["disagrees"] == "yes").sum())
        print(f"{table.title}: {flagged} disagree with the paper; wrote {out / table.name}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
