"""Row and feature completion counts, and the first token test beside its baseline."""

from __future__ import annotations

import pandas as pd

from tabmem.report.cell_text import (
    applicable,
    fraction,
    hits,
    number,
    reason_notes,
    source,
    tag,
)
from tabmem.report.fill_commands import NO_RUN
from tabmem.report.paper_runs import PaperRuns
from tabmem.report.writers import ReportTable


def completion_table(runs: PaperRuns) -> ReportTable:
    """Per dataset: the feature asked, then ``k/n`` exact rows and exact values per model."""
    missing = runs.missing_cells()
    rows, sources, reasons = [], [], {}
    for dataset in runs.datasets:
        row = {"dataset": dataset, "feature": ""}
        features = []
        for test, label in (("row_completion", "row"), ("feature_completion", "feature")):
            for model in runs.models:
                column = f"{label}: {model}"
                run = runs.cell(model, dataset, test)
                if run is None:
                    row[column] = NO_RUN
                    missing.add(model, dataset, f"test={test}", "transform=original")
                    continue
                row[column] = hits(run)
                sources.append(source(dataset, column, model, run, row[column]))
                if not applicable(run):
                    reasons[(dataset, test)] = tag(run, "reason")
                if test == "feature_completion" and tag(run, "info.feature"):
                    features.append(tag(run, "info.feature"))
        row["feature"] = " / ".join(dict.fromkeys(features))
        rows.append(row)
    columns = [
        "dataset",
        "feature",
        *(f"{label}: {m}" for label in ("row", "feature") for m in runs.models),
    ]
    notes = [
        "row: exact next rows written, of the rows asked (row completion); feature: exact "
        "values of the feature named, of the rows asked (feature completion). Baselines, "
        "p-values and verdicts: docs/memorization.md.",
        *reason_notes(reasons),
    ]
    if missing:
        notes.append(missing.footnote())
    return ReportTable(
        name="completion",
        title="Row and feature completion: exact hits of queries per model",
        frame=pd.DataFrame(rows, columns=columns),
        footnotes=notes,
        run_ids=sorted({s["run_id"] for s in sources}),
        sources=sources,
    )


def first_token_table(runs: PaperRuns) -> ReportTable:
    """Per dataset: each model's first-token accuracy and the data-only baseline accuracy."""
    missing = runs.missing_cells()
    rows, sources, reasons = [], [], {}
    for dataset in runs.datasets:
        row: dict[str, str] = {"dataset": dataset}
        baselines = []
        for model in runs.models:
            run = runs.cell(model, dataset, "first_token")
            if run is None:
                row[model] = NO_RUN
                missing.add(model, dataset, "test=first_token", "transform=original")
                continue
            row[model] = _accuracy(run)
            sources.append(source(dataset, model, model, run, row[model]))
            if not applicable(run):
                reasons[(dataset, "first_token")] = tag(run, "reason")
            elif number(run, "baseline") is not None:
                best = tag(run, "info.best_baseline")
                baselines.append(fraction(number(run, "baseline")) + (f" ({best})" if best else ""))
        row["baseline"] = " / ".join(dict.fromkeys(baselines)) or _empty_baseline(row)
        rows.append(row)
    notes = [
        "Accuracy of the first token of the next row (hits/queries). baseline: the accuracy "
        "of the best data-only predictor cross-fitted over the file's rows "
        "(most frequent token, logistic regression, gradient-boosted trees; each row predicted "
        "by a fit without it), never on the model's answers; when "
        "models see different tokens (their own tokenizers) their baselines are listed in "
        "model order. Verdict rule: docs/memorization.md.",
        *reason_notes(reasons),
    ]
    if missing:
        notes.append(missing.footnote())
    return ReportTable(
        name="first_token",
        title="First token test: accuracy per model and the data-only baseline",
        frame=pd.DataFrame(rows, columns=["dataset", *runs.models, "baseline"]),
        footnotes=notes,
        run_ids=sorted({s["run_id"] for s in sources}),
        sources=sources,
    )


def _accuracy(run: pd.Series) -> str:
    if not applicable(run):
        return "n/a"
    return f"{fraction(number(run, 'rate'))} ({hits(run)})"


def _empty_baseline(row: dict[str, str]) -> str:
    values = [v for k, v in row.items() if k != "dataset"]
    return "n/a" if values and all(v == "n/a" for v in values) else NO_RUN
