"""The test overview: one row per dataset and model, the dataset verdict, then the knowledge and
memorization tests, one verdict mark per cell. Datasets without any run are named in a footnote
rather than filling rows of dashes."""

from __future__ import annotations

import pandas as pd

from tabmem.battery.lifecycle import title_of
from tabmem.report.cell_text import MARKS, mark, source
from tabmem.report.dataset_verdicts import DATASET_TEST
from tabmem.report.fill_commands import NO_RUN, MissingCells
from tabmem.report.paper_runs import PaperRuns, suite_tests
from tabmem.report.writers import ReportTable


def overview_tests() -> dict[str, str]:
    """Test name -> column title (the test's own): the paper grid's knowledge suite, then its
    memorization suite (``conf/test/knowledge.yaml``, ``conf/test/memorization.yaml``)."""
    return {
        test: title_of(test) for test in (*suite_tests("knowledge"), *suite_tests("memorization"))
    }


DATASET_TITLE = "dataset verdict"
"""The overview's first column: the tests of rows seen of each model × dataset, combined."""

NO_RUN_MARK = f"{NO_RUN}†"
"""No run: ``-`` with a dagger, since a bare ``-`` is the mark of a test that does not apply."""


def overview_table(runs: PaperRuns) -> ReportTable:
    """One row per dataset and model that has a run, one column per test; each cell holds
    that model's one mark."""
    missing = runs.missing_cells()
    rows, sources, idle = [], [], []
    columns = {DATASET_TEST: DATASET_TITLE, **overview_tests()}
    for dataset in runs.datasets:
        found = []
        for model in runs.models:
            row = {"dataset": dataset, "model": model}
            for test, title in columns.items():
                run = runs.cell(model, dataset, test)
                if run is None:
                    row[title] = NO_RUN_MARK
                    if test != DATASET_TEST:  # made by the suites' runs, not run by itself
                        missing.add(model, dataset, f"test={test}", "transform=original")
                    continue
                row[title] = mark(run)
                sources.append(source(dataset, title, model, run, mark(run)))
            found.append(row)
        if any(v != NO_RUN_MARK for row in found for k, v in row.items() if k in columns.values()):
            rows += found
        else:
            idle.append(dataset)
    frame = pd.DataFrame(rows, columns=["dataset", "model", *columns.values()])
    return ReportTable(
        name="overview",
        title="Knowledge and memorization tests: verdict per dataset, model and test",
        frame=frame,
        footnotes=_footnotes(runs, missing, idle),
        run_ids=sorted({s["run_id"] for s in sources}),
        sources=sources,
    )


def _footnotes(runs: PaperRuns, missing: MissingCells, idle: list[str]) -> list[str]:
    legend = ", ".join(f"{symbol} {verdict.replace('_', ' ')}" for verdict, symbol in MARKS.items())
    notes = [
        f"{legend}. The first column is the dataset verdict, the main mark: the tests of rows "
        "seen of the model and dataset combined (Cauchy combination, Holm's procedure names the "
        "tests that carry it); the other columns are each test's own verdict. Each rule: "
        "docs/tests.md, docs/memorization.md, docs/knowledge.md.",
    ]
    if not runs.models:
        notes.append("No language model has a run.")
    if idle and len(idle) < len(runs.datasets):
        notes.append(f"No run yet on {', '.join(idle)}: left out (the command below fills them).")
    if missing:
        notes.append(missing.footnote(NO_RUN_MARK))
    return notes
