"""Summary statistics of zero-knowledge samples: copied rows, best n-gram match, copied values."""

from __future__ import annotations

import pandas as pd

from tabmem.report.cell_text import fraction, mark, number, percent, source, tag
from tabmem.report.fill_commands import NO_RUN
from tabmem.report.paper_runs import TEMPERATURE, PaperRuns
from tabmem.report.writers import ReportTable

TEST = "sample"
COLUMNS = (
    "complete samples",
    "copied rows",
    "copy chance",
    "best n-gram match: samples",
    "best n-gram match: real rows",
    "copied values",
    "verdict",
)


def samples_table(runs: PaperRuns) -> ReportTable:
    """One row per dataset, model and sampling temperature that was run."""
    missing = runs.missing_cells()
    rows, sources = [], []
    for dataset in runs.datasets:
        for model in runs.models:
            found = runs.by_temperature(model, dataset, TEST)
            if not found:
                missing.add(model, dataset, f"test={TEST}", "transform=original")
                rows.append(
                    {"dataset": dataset, "model": model, "temperature": NO_RUN}
                    | dict.fromkeys(COLUMNS, NO_RUN)
                )
            for run in found:
                row = _row(dataset, model, run)
                rows.append(row)
                label = f"{dataset} / {model} / {row['temperature']}"
                sources += [source(label, c, model, run, row[c]) for c in COLUMNS]
    notes = [
        "complete samples: samples that name every feature, of the queries. copied rows: "
        "samples equal to a real row in every feature, of the queries, and how many different "
        "rows they are (p: the distinct rows against the most a data-only sampler writes among "
        "as many samples). copy chance: the strongest data-only sampler's chance that one "
        "sample copies a real row. best n-gram match: the mean number of "
        "features a sample shares with its closest real row, beside the same for real rows "
        "against the other rows. copied values: the share of sampled values that occur in "
        "their column. Rules: docs/knowledge.md (zero-knowledge sampling).",
    ]
    if missing:
        notes.append(missing.footnote())
    return ReportTable(
        name="samples",
        title="Zero-knowledge samples: summary statistics per dataset, model and temperature",
        frame=pd.DataFrame(rows, columns=["dataset", "model", "temperature", *COLUMNS]),
        footnotes=notes,
        run_ids=sorted({s["run_id"] for s in sources}),
        sources=sources,
    )


def _row(dataset: str, model: str, run: pd.Series) -> dict[str, str]:
    queries = number(run, "n_queries")
    total = "?" if queries is None else str(round(queries))
    complete = number(run, "samples_complete")
    copies = number(run, "copies")
    p_value = number(run, "copy_p_value")
    copied = "?" if copies is None else f"{round(copies)}/{total}"
    distinct = number(run, "distinct_copies")
    if distinct is not None:
        copied += f", {round(distinct)} distinct"
    if p_value is not None:
        copied += f" (p={p_value:.2g})" if p_value > 0 else " (p<1e-300)"
    chance = number(run, "copy_chance")
    return {
        "dataset": dataset,
        "model": model,
        "temperature": tag(run, TEMPERATURE) or "?",
        "complete samples": "?" if complete is None else f"{round(complete)}/{total}",
        "copied rows": copied,
        "copy chance": "?" if chance is None else f"{chance:.2g}",
        "best n-gram match: samples": fraction(number(run, "best_match_samples"), 1),
        "best n-gram match: real rows": fraction(number(run, "best_match_real_rows"), 1),
        "copied values": percent(number(run, "known_value_share")),
        "verdict": mark(run),
    }
