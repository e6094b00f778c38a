"""The lab's TPR/FPR tables and figures for ``make paper-tables`` (one pair per lab setting).

``lab_reports(frame)`` takes the runs frame the paper report reads (``PaperRuns.frame``) and
returns report tables and figures in its types, so the report can list them with the rest.
"""

from __future__ import annotations

import pandas as pd

from tabmem.lab.report import lab_cells, rate_figure, rate_table
from tabmem.report.writers import ReportFigure, ReportTable

SETTING = "param.model.lab.setting"
FOOTNOTE = (
    "Detected: verdict 'evidence'. TPR: planted datasets on checkpoints that read them that "
    "often; FPR: held-out datasets on every checkpoint; base: planted datasets before "
    "fine-tuning. Rates count the cells where the test applies. 95 % Clopper-Pearson "
    "intervals. Method: docs/lab.md."
)


def _display(table: pd.DataFrame) -> pd.DataFrame:
    cells = table["cells"]
    return pd.DataFrame(
        {
            "test": table["test"],
            "group": table["group"],
            "repetitions": table["repetitions"],
            "detected / cells": [
                f"{d} / {c}" for d, c in zip(table["detected"], table["cells"], strict=True)
            ],
            "rate": [f"{r:.2f}" if c else "-" for r, c in zip(table["rate"], cells, strict=True)],
            "95 % CI": [
                f"[{lo:.2f}, {hi:.2f}]" if c else "-"
                for lo, hi, c in zip(table["ci_low"], table["ci_high"], cells, strict=True)
            ],
            "not applicable": table["not_applicable"],
            "datasets": table["datasets"],
        }
    )


def lab_reports(frame: pd.DataFrame) -> tuple[list[ReportTable], list[ReportFigure]]:
    """One TPR/FPR table and one figure per lab setting found among the runs."""
    if frame.empty or SETTING not in frame:
        return [], []
    tables, figures = [], []
    for setting in sorted({str(s) for s in frame[SETTING].dropna() if str(s)}):
        cells = lab_cells(frame, setting)
        table = rate_table(cells)
        if table.empty:
            continue
        runs = sorted(cells["run_id"])
        tables.append(
            ReportTable(
                name=f"lab-{setting}",
                title=f"Contamination lab '{setting}': true- and false-positive rates per test",
                frame=_display(table),
                footnotes=[FOOTNOTE],
                run_ids=runs,
            )
        )
        figures.append(
            ReportFigure(
                name=f"lab-{setting}-tpr",
                title=f"Contamination lab '{setting}': detection rate by repetitions",
                figure=rate_figure(table),
                caption=FOOTNOTE,
                run_ids=runs,
            )
        )
    return tables, figures
