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
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from tabmem.report.calibration import calibration_runs, calibration_tables
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


def paper_tables(runs: PaperRuns) -> list[ReportTable]:
    """Every table the runs can fill; those of tests without runs show ``-`` cells. The
    contamination lab's tables come with its figures, from ``lab_reports``."""
    tables = [
        overview_table(runs),
        completion_table(runs),
        first_token_table(runs),
        fewshot_table(runs),
        *baseline_tables(runs),
        samples_table(runs),
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
