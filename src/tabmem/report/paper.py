"""``make paper-tables``: every table and figure of the two papers that the tracked runs fill.

Reads the MLflow store and nothing else (the scatter plots' data panel reads the dataset's own
file); writes each table as Markdown, LaTeX and CSV (plus ``<name>.sources.csv``: the run
behind each cell), each figure as PNG and PDF, and ``index.md`` / ``runs.csv``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path

from tabmem.report.calibration import calibration_runs, calibration_tables
from tabmem.report.fill_commands import NO_RUN
from tabmem.report.lab_tables import lab_reports
from tabmem.report.learning_figures import accuracy_difference_figure, statistical_learning_figure
from tabmem.report.learning_tables import baseline_tables, fewshot_table
from tabmem.report.memorization_tables import completion_table, first_token_table
from tabmem.report.overview_table import overview_table
from tabmem.report.paper_index import write_index
from tabmem.report.paper_runs import PaperRuns
from tabmem.report.probes_table import probes_tables
from tabmem.report.sample_figures import heat_map_figures, scatter_figures
from tabmem.report.samples_table import samples_table
from tabmem.report.writers import (
    ReportFigure,
    ReportTable,
    write_figure,
    write_sources,
    write_table,
)


@dataclass
class PaperReport:
    """What ``write_paper`` wrote: its tables, figures and every file."""

    out: Path
    tables: list[ReportTable]
    figures: list[ReportFigure]
    files: list[Path] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out / "index.md"

    @property
    def empty(self) -> list[str]:
        """The tables and figures no run filled, by file name."""
        return [t.name for t in self.tables if not t.run_ids] + [
            f.name for f in self.figures if not f.run_ids
        ]

    def said(self, seconds: float) -> str:
        """What was written, in a line or two: the tables and figures that hold runs, and those
        that are empty (written all the same, with the command that fills them)."""
        tables = sum(bool(t.run_ids) for t in self.tables)
        figures = sum(bool(f.run_ids) for f in self.figures)
        text = (
            f"{tables} tables and {figures} figures with runs ({len(self.files)} files) in "
            f"{seconds:.1f}s: {self.index}"
        )
        if self.empty:
            text += (
                f"\nEmpty, no run yet: {', '.join(self.empty)} (each says the tabmem run "
                "command that fills it)."
            )
        return text


ROW_KEYS = ("dataset", "model", "feature", "temperature")
"""Columns that name a table's row rather than hold a run's number."""


def without_idle_rows(table: ReportTable) -> ReportTable:
    """``table`` without the rows that hold no run (every number ``-``), named in a footnote
    before the one that says how to fill them; a table without any run keeps its columns."""
    frame = table.frame
    values = [c for c in frame.columns if c not in ROW_KEYS]
    if frame.empty or not values:
        return table
    idle = frame[values].astype(str).isin([NO_RUN, ""]).all(axis=1)
    if not idle.any():
        return table
    kept = frame[~idle].reset_index(drop=True)
    if kept.empty:
        note = "No run yet: the command below fills this table."
    else:
        left = (
            sorted(
                set(frame.loc[idle, "dataset"]) - set(kept["dataset"]),
                key=list(frame["dataset"]).index,
            )
            if "dataset" in frame
            else []
        )
        note = (
            f"Rows without a run are left out (no run yet on {', '.join(left)})."
            if left
            else "Rows without a run are left out."
        )
    notes = list(table.footnotes)
    notes.insert(max(0, len(notes) - 1) if notes else 0, note)
    return replace(table, frame=kept, footnotes=notes)


def paper_tables(runs: PaperRuns) -> list[ReportTable]:
    """Every table the runs can fill, each without the rows no run filled (a table of tests
    without runs keeps only its columns and the command that fills it). The contamination
    lab's tables come with its figures, from ``lab_reports``."""
    tables = [
        overview_table(runs),
        *map(
            without_idle_rows,
            [
                completion_table(runs),
                first_token_table(runs),
                fewshot_table(runs),
                *baseline_tables(runs),
                samples_table(runs),
            ],
        ),
    ]
    forecast = forecast_report(runs)
    return [*tables, *([forecast] if forecast else []), *probes_reports(runs)]


def paper_figures(runs: PaperRuns) -> Iterator[ReportFigure]:
    """Every figure, each as soon as it is built: learning against LR, statistical learning,
    sample scatters, heat maps."""
    yield accuracy_difference_figure(runs)
    yield statistical_learning_figure(runs)
    yield from scatter_figures(runs)
    yield from heat_map_figures(runs)


def write_paper(
    tracking_uri: str,
    out: Path,
    experiments: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
) -> PaperReport:
    """Read the store once, build every table and figure, and write them under ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    runs = PaperRuns.load(tracking_uri, experiments, models, datasets)
    lab_tables, lab_figures = lab_reports(runs.frame)
    calibration = calibration_tables(calibration_runs(runs.frame))
    report = PaperReport(out, [*paper_tables(runs), *lab_tables, *calibration], [])
    for table in report.tables:
        report.files += write_table(table, out)
        report.files += [p for p in [write_sources(table, out)] if p]
    # Drawing is most of the time: figures are drawn in other processes while the next is built.
    with ProcessPoolExecutor(_workers(), mp_context=get_context("forkserver")) as pool:
        written = []
        for figure in itertools.chain(paper_figures(runs), lab_figures):
            report.figures.append(figure)
            written.append(pool.submit(write_figure, figure.figure, figure.name, out))
        report.files += [path for job in written for path in job.result()]
    report.files += write_index(runs, report.tables, report.figures, out)
    return report


def _workers() -> int:
    """Processes that draw figures: the cores this process may use, at most four."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


def _experiment_ids(runs: PaperRuns) -> list[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=runs.tracking_uri)
    found = client.search_experiments()
    return [e.experiment_id for e in found if not runs.experiments or e.name in runs.experiments]


def forecast_report(runs: PaperRuns) -> ReportTable | None:
    """The forecasting table (``tabmem.report.forecast_table``) when there are forecast runs."""
    found = runs.runs_of("forecast")
    if found.empty:
        return None
    from mlflow.tracking import MlflowClient

    from tabmem.report.forecast_table import forecast_table

    table = forecast_table(MlflowClient(tracking_uri=runs.tracking_uri), _experiment_ids(runs))
    keep = [c for c in table.columns if c in runs.models or c == "naive"]
    return ReportTable(
        name="forecast",
        title="Forecasts before and after the training cutoff: relative error per period",
        frame=table[keep].reset_index(),
        footnotes=[
            "Robust mean relative error per period; naive: next value = last value. The "
            "last row of each series gives each model's verdict. Method: docs/forecast.md."
        ],
        run_ids=sorted(found.loc[found["model"].isin(runs.models), "run_id"]),
    )


def probes_reports(runs: PaperRuns) -> list[ReportTable]:
    """The completion / existence probes tables of Silvestri et al. (2025), one per model."""
    newest = runs.newest()
    return probes_tables(newest[newest["model"].isin(runs.models)] if not newest.empty else newest)
