"""A page of who memorized what: one self-contained HTML file, models × datasets.

Each cell shows the dataset verdict of the model on the dataset (the tests of rows seen,
combined: ``dataset_verdicts.py``) in its colour; where a model × dataset has no dataset
verdict (in an experiment and transform), each test's own verdict instead. Every mark links to
its run in the MLflow UI and carries the counts behind it in its ``title`` (shown on hover); a
dataset verdict's carries its grid q-value too, over the dataset verdicts of its experiment that
the page shows (``tabmem.stats.combine.benjamini_hochberg``), and the page says in one line per
experiment which error rate those q-values control.
Selects filter the marks by experiment, transform and test. The page has its CSS and script
inline and fetches nothing, so it opens from disk, offline, or as an e-mailed file.
"""

from __future__ import annotations

import html
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tabmem.report.cell_text import MARKS, hits, number, tag
from tabmem.report.dataset_verdicts import DATASET_TEST, SCOPE_TAG
from tabmem.report.paper_runs import paper_datasets
from tabmem.results import Verdict
from tabmem.stats.combine import DatasetRule, benjamini_hochberg, grid_q_sentence
from tabmem.tracking.runs import load_runs
from tabmem.tracking.store import sqlite_path

if TYPE_CHECKING:
    from tabmem.tracking.store import TrackingStore

DEFAULT_UI_URL = "http://127.0.0.1:5000"
"""Where ``make ui`` serves the MLflow UI: the base of every mark's link."""
PAGE_NAME = "report.html"
"""The page's file name where a grid writes it into its folder, and its artifact's name."""
VERDICTS = tuple(v.value for v in Verdict)


@dataclass(frozen=True)
class Mark:
    """One verdict on the page: a dataset verdict, or one test's verdict, and its run."""

    model: str
    dataset: str
    test: str
    transform: str
    experiment: str
    verdict: str
    run_id: str
    url: str
    title: str
    main: bool  # shown before any filter: a dataset verdict, or a test where there is none

    @property
    def label(self) -> str:
        """The mark's text: the dataset verdict by name, a test by its name."""
        what = self.verdict.replace("_", " ") if self.test == DATASET_TEST else self.test
        suffix = "" if self.transform == "original" else f" · {self.transform}"
        return f"{MARKS.get(self.verdict, '?')} {what}{suffix}"


def _count(n: int, noun: str) -> str:
    """``1 model``, ``2 models``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


@dataclass
class Matrix:
    """The marks of one store, with the models (rows) and datasets (columns) they fill, and the
    lines that say what the grid q-values of each experiment control."""

    models: list[str]
    datasets: list[str]
    marks: list[Mark]
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._cells: dict[tuple[str, str], list[Mark]] = {}
        order = sorted(
            self.marks, key=lambda m: (m.test != DATASET_TEST, m.experiment, m.transform, m.test)
        )
        for mark in order:
            self._cells.setdefault((mark.model, mark.dataset), []).append(mark)

    def cell(self, model: str, dataset: str) -> list[Mark]:
        """The marks of one model × dataset: dataset verdicts first, then tests by name."""
        return list(self._cells.get((model, dataset), []))

    @property
    def counts(self) -> str:
        """What the page shows, counted: models × datasets, dataset verdicts and test runs."""
        verdicts = sum(m.test == DATASET_TEST for m in self.marks)
        return (
            f"{_count(len(self.models), 'model')} × {_count(len(self.datasets), 'dataset')}; "
            f"{_count(verdicts, 'dataset verdict')}, "
            f"{_count(len(self.marks) - verdicts, 'test run')}"
        )

    def values(self, field: str) -> list[str]:
        """The distinct values of a mark's field (experiment, transform, test), sorted."""
        return sorted({getattr(m, field) for m in self.marks})


def run_url(ui_url: str, experiment_id: str, run_id: str) -> str:
    """A run's page in the MLflow UI."""
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def load_matrix(
    tracking_uri: str, experiments: Sequence[str] | None = None, ui_url: str = DEFAULT_UI_URL
) -> Matrix:
    """Read the store's newest finished run of each cell (per experiment) and lay out its
    verdicts: a dataset verdict hides the tests it combined until a filter asks for them."""
    frame = load_runs(tracking_uri, experiments, distinct=("experiment",))
    if frame.empty:
        return Matrix([], [], [])
    frame = frame[frame["verdict"].isin(VERDICTS)].reset_index(drop=True)
    ids, combined = _ids_and_verdict_tags(tracking_uri)
    q_values, notes = _grid_q(frame)
    by_id = {str(row["run_id"]): row for _, row in frame.iterrows()}
    judged = {_group(row) for _, row in frame.iterrows() if row["test"] == DATASET_TEST}
    marks = []
    for run_id, row in by_id.items():
        verdict_run = row["test"] == DATASET_TEST
        tags = combined.get(run_id, {})
        marks.append(
            Mark(
                model=str(row["model"]),
                dataset=str(row["dataset"]),
                test=str(row["test"]),
                transform=str(row["transform"]),
                experiment=str(row["experiment"]),
                verdict=str(row["verdict"]),
                run_id=run_id,
                url=run_url(ui_url, ids[str(row["experiment"])], run_id),
                title=(
                    _verdict_title(row, tags, by_id, q_values.get(run_id))
                    if verdict_run
                    else _test_title(row)
                ),
                main=verdict_run or _group(row) not in judged,
            )
        )
    models = sorted({m.model for m in marks})
    present = {m.dataset for m in marks}
    ordered = [d for d in paper_datasets() if d in present]
    return Matrix(models, [*ordered, *sorted(present - set(ordered))], marks, notes)


def _grid_q(frame: pd.DataFrame) -> tuple[dict[str, float], list[str]]:
    """Each dataset verdict's q-value (by run id) over the dataset verdicts of its experiment
    on the page that have a p-value, and per such experiment the line saying what they control
    (at the ``dataset_verdict.alpha`` its runs were decided at)."""
    q_values: dict[str, float] = {}
    notes = []
    verdicts = frame[frame["test"] == DATASET_TEST]
    for experiment, runs in verdicts.groupby("experiment", sort=True):
        rows = [row for _, row in runs.iterrows()]
        found = benjamini_hochberg([number(row, "p_value") for row in rows])
        q_values.update(
            {str(r["run_id"]): q for r, q in zip(rows, found, strict=True) if q is not None}
        )
        n = sum(q is not None for q in found)
        if n:
            alphas = runs.get("param.dataset_verdict.alpha", pd.Series(dtype=object)).dropna()
            alpha = float(alphas.iloc[0]) if len(alphas) else DatasetRule().alpha
            notes.append(f"Experiment {experiment}: {grid_q_sentence(n, alpha)}.")
    return q_values, notes


def _group(row: pd.Series) -> tuple[str, ...]:
    return tuple(str(row[c]) for c in ("experiment", "model", "dataset", "transform"))


def _ids_and_verdict_tags(
    tracking_uri: str,
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Each experiment's id by name (for the UI links), and the tags of every dataset-verdict
    run by id (which tests it combined, which carry it), which the run frame leaves out. A
    SQLite store is read with ``sqlite3``, read-only: the end of a grid imports no MLflow."""
    path = sqlite_path(tracking_uri)
    if path is not None:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            ids = dict(db.execute("SELECT name, experiment_id FROM experiments").fetchall())
            rows = db.execute(
                "SELECT run_uuid, key, value FROM tags WHERE run_uuid IN "
                "(SELECT run_uuid FROM tags WHERE key = ? AND value = ?)",
                (SCOPE_TAG, DATASET_TEST),
            ).fetchall()
        tags: dict[str, dict[str, str]] = {}
        for run_id, key, value in rows:
            tags.setdefault(run_id, {})[key] = value
        return {name: str(i) for name, i in ids.items()}, tags
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    ids = {e.name: e.experiment_id for e in client.search_experiments()}
    query = f"tags.{SCOPE_TAG} = '{DATASET_TEST}'"
    tags, token = {}, None
    while ids:
        page = client.search_runs(list(ids.values()), query, max_results=5000, page_token=token)
        tags.update({run.info.run_id: dict(run.data.tags) for run in page})
        token = page.token
        if not token:
            break
    return ids, tags


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def _counts(run: pd.Series) -> str:
    """hits/n, baseline and p-value of one test's run."""
    baseline = number(run, "baseline")
    return (
        f"hits {hits(run)}, baseline {'-' if baseline is None else f'{baseline:.3g}'}, "
        f"p = {_p(number(run, 'p_value'))}"
    )


def _where(run: pd.Series) -> str:
    return f"experiment {run['experiment']}, transform {run['transform']}, run {run['run_id']}"


def _test_title(run: pd.Series) -> str:
    lines = [
        f"{run['model']} × {run['dataset']}: {run['test']} {run['verdict']}",
        _counts(run),
        _where(run),
        tag(run, "reason"),
    ]
    return "\n".join(line for line in lines if line)


def _verdict_title(
    run: pd.Series, tags: dict[str, str], by_id: dict[str, pd.Series], q: float | None
) -> str:
    """A dataset verdict: combined p-value and grid q-value, the tests that carry it, each
    test's counts and the p-value it entered the combination with where its verdict raised it."""
    lines = [
        f"{run['model']} × {run['dataset']}: dataset verdict {run['verdict']}",
        f"combined p = {_p(number(run, 'p_value'))}, grid q = {_p(q)}, "
        f"carried by {tags.get('carried_by', '').replace(',', ', ') or 'no single test'}",
    ]
    for test in filter(None, tags.get("combined_tests", "").split(",")):
        member = by_id.get(tags.get(f"test.{test}.run_id", ""))
        verdict = tags.get(f"test.{test}.verdict", "")
        entered = number(run, f"entered_p.{test}")
        raised = entered is not None and entered != number(run, f"p_value.{test}")
        lines.append(
            f"  {test}: {verdict}"
            + (f", {_counts(member)}" if member is not None else "")
            + (f", entered as p = {_p(entered)}" if raised else "")
        )
    lines.append(_where(run))
    return "\n".join(lines)


STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
.meta, .how { color: #555; margin: .2em 0; max-width: 70em; }
.filters { margin: 1em 0; display: flex; gap: 1.2em; flex-wrap: wrap; }
.filters label { font-weight: 600; }
table.matrix { border-collapse: collapse; }
.matrix th, .matrix td { border: 1px solid #ccc; padding: .35em .5em; vertical-align: top; }
.matrix thead th { background: #f3f3f3; }
.matrix tbody th { text-align: left; background: #fafafa; white-space: nowrap;
  vertical-align: middle; }
.matrix td.empty::after { content: "–"; color: #aaa; }
a.mark { display: inline-block; margin: .1em; padding: .15em .45em; border-radius: .3em;
  text-decoration: none; color: #fff; white-space: nowrap; font-size: .92em; }
a.mark[hidden] { display: none; }
a.mark.dataset { font-weight: 700; font-size: 1em; }
.evidence { background: #c62828; }
.ambiguous { background: #f9a825; color: #222 !important; }
.no_evidence { background: #2e7d32; }
.not_applicable { background: #9e9e9e; }
.legend span { display: inline-block; margin-right: .6em; padding: .1em .45em;
  border-radius: .3em; color: #fff; }
"""

SCRIPT = """
function applyFilters() {
  const pick = id => document.getElementById(id).value;
  const experiment = pick('experiment'), transform = pick('transform'), test = pick('test');
  for (const a of document.querySelectorAll('a.mark')) {
    const d = a.dataset;
    const byTest = test === '' ? d.main === '1' : test === '*' || d.test === test;
    a.hidden = !(byTest && (!experiment || d.experiment === experiment)
      && (!transform || d.transform === transform));
  }
  for (const td of document.querySelectorAll('td.cell')) {
    td.classList.toggle('empty', !td.querySelector('a.mark:not([hidden])'));
  }
}
for (const s of document.querySelectorAll('.filters select')) {
  s.addEventListener('change', applyFilters);
}
applyFilters();
"""


def _select(name: str, label: str, options: list[tuple[str, str]]) -> str:
    items = "".join(
        f'<option value="{html.escape(v)}">{html.escape(t)}</option>' for v, t in options
    )
    return f'<label for="{name}">{label}</label> <select id="{name}">{items}</select>'


def _mark_html(mark: Mark) -> str:
    data = {
        "experiment": mark.experiment,
        "transform": mark.transform,
        "test": mark.test,
        "main": "1" if mark.main else "0",
        "run-id": mark.run_id,
    }
    attributes = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in data.items())
    kind = " dataset" if mark.test == DATASET_TEST else ""
    return (
        f'<a class="mark {html.escape(mark.verdict)}{kind}" href="{html.escape(mark.url)}" '
        f'title="{html.escape(mark.title)}" {attributes}>{html.escape(mark.label)}</a>'
    )


def render(matrix: Matrix, source: str) -> str:
    """The page: filters, legend and the matrix, with its style and script inline."""
    tests = [t for t in matrix.values("test") if t != DATASET_TEST]
    filters = [
        _select(
            "experiment",
            "Experiment",
            [("", "all"), *((e, e) for e in matrix.values("experiment"))],
        ),
        _select(
            "transform", "Transform", [("", "all"), *((t, t) for t in matrix.values("transform"))]
        ),
        _select(
            "test",
            "Test",
            [
                ("", "dataset verdict (else each test)"),
                ("*", "every test"),
                (DATASET_TEST, "dataset verdicts only"),
                *((t, t) for t in tests),
            ],
        ),
    ]
    legend = "".join(f'<span class="{v}">{MARKS[v]} {v.replace("_", " ")}</span>' for v in VERDICTS)
    head = "".join(f"<th>{html.escape(d)}</th>" for d in matrix.datasets)
    rows = []
    for model in matrix.models:
        cells = "".join(
            f'<td class="cell" data-dataset="{html.escape(d)}">'
            + "".join(_mark_html(m) for m in matrix.cell(model, d))
            + "</td>"
            for d in matrix.datasets
        )
        rows.append(
            f'<tr data-model="{html.escape(model)}"><th>{html.escape(model)}</th>{cells}</tr>'
        )
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    notes = "".join(f'<p class="how grid-q">{html.escape(note)}</p>' for note in matrix.notes)
    body = (
        "<h1>Who memorized what</h1>"
        f'<p class="meta">{matrix.counts}; from {html.escape(source)}, {when}.</p>'
        '<p class="how">Each cell is the dataset verdict of the model on the dataset (its tests '
        "of rows seen, combined); where there is none, each test's own verdict. Hover a mark for "
        "the counts behind it; click it to open its run in the MLflow UI (make ui).</p>"
        f"{notes}"
        f'<div class="filters">{"".join(filters)}</div>'
        f'<p class="legend">{legend}</p>'
        f'<table class="matrix"><thead><tr><th>model \\ dataset</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    if not matrix.marks:
        body += "<p>No finished run with a verdict in this store.</p>"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>tabmem: who memorized what</title>"
        f"<style>{STYLE}</style></head><body>{body}<script>{SCRIPT}</script></body></html>\n"
    )


def ui_url_for(tracking_uri: str) -> str:
    """Where the marks link by default: a tracking server's own UI, else where ``make ui``
    serves a local store's."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/")
    return DEFAULT_UI_URL


def write_page(
    tracking_uri: str,
    out: Path,
    experiments: Sequence[str] | None = None,
    ui_url: str | None = None,
) -> Matrix:
    """Write the page of the store's runs (``experiments``, else all) to ``out``, its marks
    linking to ``ui_url`` (default: ``ui_url_for`` the store); its matrix."""
    matrix = load_matrix(tracking_uri, experiments, ui_url or ui_url_for(tracking_uri))
    source = tracking_uri + (f" (experiments: {', '.join(experiments)})" if experiments else "")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(matrix, source), encoding="utf-8")
    return matrix


def pages_experiment(experiment: str) -> str:
    """The MLflow experiment that keeps the pages of ``experiment``'s grids: apart from its
    cells, so that every run of the cells' experiment stays a cell or a dataset verdict."""
    return f"{experiment}-report"


def log_page(store: TrackingStore, page: Path, experiment: str, grid_folder: Path) -> str:
    """Log the page a grid wrote as the artifact ``report.html`` of one run of the grid in
    ``store`` (an experiment of ``pages_experiment``), so the page is found, and opens, in the
    MLflow UI beside the runs it shows; the run's id."""
    when = "/".join(grid_folder.parts[-2:])
    return store.log_cell(
        f"who memorized what · {experiment} · {when}",
        tags={"report_of": experiment, "grid_folder": str(grid_folder)},
        params={},
        metrics={},
        tables={},
        texts={PAGE_NAME: page.read_text(encoding="utf-8")},
        failed=False,
        description=(
            f"The page of who memorized what in experiment '{experiment}' as the grid in "
            f"{grid_folder} left it: open the artifact {PAGE_NAME}, or the same file in that "
            "folder."
        ),
    )
