"""Few-shot accuracy per dataset × transform: the language models beside LR and GBT."""

from __future__ import annotations

import pandas as pd

from tabmem.report.cell_text import (
    NOT_APPLICABLE,
    applicable,
    number,
    reason_notes,
    source,
    tag,
    with_error,
)
from tabmem.report.fill_commands import NO_RUN
from tabmem.report.paper_runs import TRANSFORMS, PaperRuns
from tabmem.report.writers import ReportTable

TEST = "fewshot_predict"
ALWAYS_SHOWN = ("logistic-regression", "gradient-boosted-tree")
"""The baselines every learning table shows, run or not (the papers' LR and GBT)."""

SHORT = {"logistic-regression": "LR", "gradient-boosted-tree": "GBT", "majority-class": "majority"}

ACCURACY_NOTE = (
    "Accuracy on held-out rows ± its standard error (binomial). Language models predict each "
    "row from few-shot examples; baselines are fitted on every row outside the row's test "
    "block (docs/learning.md). Transforms: original (the file), perturbed (values moved by "
    "about 1%), task (plain names, dataset not named), statistical (X1..Xn, standardised)."
)


def shown_baselines(runs: PaperRuns) -> list[str]:
    """LR and GBT always, other baselines (majority class) when they have a run."""
    ran = set(runs.runs_of(TEST)["model"]) if not runs.frame.empty else set()
    return [b for b in runs.baselines if b in ALWAYS_SHOWN or b in ran]


class _Cells:
    """Accuracy cells with their sources, missing runs and not-applicable reasons."""

    def __init__(self, runs: PaperRuns) -> None:
        self.runs = runs
        self.missing = runs.missing_cells()
        self.sources: list[dict[str, str]] = []
        self.reasons: dict[tuple[str, str], str] = {}

    def text(self, model: str, dataset: str, transform: str, row: str) -> str:
        run = self.runs.cell(model, dataset, TEST, transform)
        if run is None:
            self.missing.add(model, dataset, f"test={TEST}", f"transform={transform}")
            return NO_RUN
        if not applicable(run):
            self.reasons.setdefault((dataset, TEST), tag(run, "reason"))
            value = NOT_APPLICABLE
        else:
            value = with_error(number(run, "accuracy"), number(run, "accuracy_se"))
        self.sources.append(source(row, transform, model, run, value))
        return value

    def footnotes(self, *notes: str) -> list[str]:
        found = [*notes, *reason_notes(self.reasons)]
        return [*found, self.missing.footnote()] if self.missing else found


def fewshot_table(runs: PaperRuns) -> ReportTable:
    """Rows: dataset × (language models, then the baselines); columns: the four transforms."""
    cells = _Cells(runs)
    rows = []
    for dataset in runs.datasets:
        for model in [*runs.models, *shown_baselines(runs)]:
            label = SHORT.get(model, model)
            row = {"dataset": dataset, "model": label}
            for transform in TRANSFORMS:
                row[transform] = cells.text(model, dataset, transform, f"{dataset} / {label}")
            rows.append(row)
    return ReportTable(
        name="fewshot_accuracy",
        title="Few-shot prediction: accuracy per dataset and transform",
        frame=pd.DataFrame(rows, columns=["dataset", "model", *TRANSFORMS]),
        footnotes=cells.footnotes(ACCURACY_NOTE),
        run_ids=sorted({s["run_id"] for s in cells.sources}),
        sources=cells.sources,
    )


def baseline_table(runs: PaperRuns, baseline: str) -> ReportTable:
    """One baseline's accuracy: rows datasets, columns the four transforms."""
    cells = _Cells(runs)
    rows = []
    for dataset in runs.datasets:
        row = {"dataset": dataset}
        for transform in TRANSFORMS:
            row[transform] = cells.text(baseline, dataset, transform, dataset)
        rows.append(row)
    label = SHORT.get(baseline, baseline)
    return ReportTable(
        name=f"{label.lower()}_accuracy",
        title=f"{label} ({baseline}): accuracy per dataset and transform",
        frame=pd.DataFrame(rows, columns=["dataset", *TRANSFORMS]),
        footnotes=cells.footnotes(ACCURACY_NOTE),
        run_ids=sorted({s["run_id"] for s in cells.sources}),
        sources=cells.sources,
    )


def baseline_tables(runs: PaperRuns) -> list[ReportTable]:
    """LR and GBT (always), and any other baseline that was run."""
    return [baseline_table(runs, b) for b in shown_baselines(runs)]
