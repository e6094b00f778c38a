"""A page of who memorized what: one self-contained HTML file, models × datasets.

Each cell shows the dataset verdict of the model on the dataset (the tests of rows seen,
combined: ``dataset_verdicts.py``) in its colour; where a model × dataset has no dataset
verdict (in an experiment and transform), each test's own verdict instead. Every mark prints the
numbers behind it (a test's hits, baseline and p-value; a dataset verdict's combined p-value,
its grid q-value over the dataset verdicts of its experiment that the page shows
(``tabmem.stats.combine.benjamini_hochberg``), the tests that carry it and each combined test's
counts), so a printout or a screenshot keeps them, and links to its run in the MLflow UI; the
page says in one line per experiment which error rate the q-values control, and links each
experiment's runs list. A cell whose newest run failed shows its error, and a page written by a
grid shows the cells the grid skipped with the reason. ``compare`` sets two models side by side
on the files both ran.
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
from tabmem.report.dataset_verdicts import DATASET_TEST, SCOPE_TAG, combined_runs
from tabmem.report.paper_runs import paper_datasets
from tabmem.results import Verdict
from tabmem.stats.combine import DatasetRule, benjamini_hochberg, grid_q_sentence
from tabmem.tracking.runs import all_runs, latest_failed, latest_finished
from tabmem.tracking.store import sqlite_path
from tabmem.tracking.ui_links import DEFAULT_UI_URL, experiment_url, run_url, ui_url_for

if TYPE_CHECKING:
    from tabmem.results import CellResult
    from tabmem.tracking.store import TrackingStore

__all__ = ["DEFAULT_UI_URL", "PAGE_NAME", "load_matrix", "render", "ui_url_for", "write_page"]

PAGE_NAME = "report.html"
"""The page's file name where a grid writes it into its folder, and its artifact's name."""
VERDICTS = tuple(v.value for v in Verdict)
FAILED, SKIPPED = "failed", "skipped"
"""A cell whose newest run failed, and a cell a grid skipped (no run): marks with a reason."""
STATE_MARKS = {FAILED: "!", SKIPPED: "·"}
REASON_CHARS = 240
"""How much of a reason or an error a mark prints (its hover text has it whole)."""


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
    numbers: tuple[str, ...] = ()  # printed under the label: counts, p, q, carrying tests
    also: tuple[str, ...] = ()  # further tests of the cell that failed with the same error

    @property
    def tests(self) -> tuple[str, ...]:
        return (self.test, *self.also)

    @property
    def label(self) -> str:
        """The mark's text: the dataset verdict by name, a test by its name (a failed or
        skipped test says so)."""
        what = self.verdict.replace("_", " ") if self.test == DATASET_TEST else self.test
        if self.verdict in STATE_MARKS:
            what = f"{', '.join(self.tests)} {self.verdict}"
        suffix = "" if self.transform == "original" else f" · {self.transform}"
        symbol = MARKS.get(self.verdict) or STATE_MARKS.get(self.verdict, "?")
        return f"{symbol} {what}{suffix}"


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
    links: dict[str, str] = field(default_factory=dict)  # experiment -> its runs in the UI

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
        """What the page shows, counted: models × datasets, dataset verdicts, test runs, and
        the failed and skipped tests (never left out in silence)."""
        verdicts = sum(m.test == DATASET_TEST for m in self.marks)
        failed = sum(len(m.tests) for m in self.marks if m.verdict == FAILED)
        skipped = sum(len(m.tests) for m in self.marks if m.verdict == SKIPPED)
        text = (
            f"{_count(len(self.models), 'model')} × {_count(len(self.datasets), 'dataset')}; "
            f"{_count(verdicts, 'dataset verdict')}, "
            f"{_count(sum(m.verdict in VERDICTS for m in self.marks) - verdicts, 'test run')}"
        )
        if failed:
            text += f", {failed} failed"
        if skipped:
            text += f", {skipped} skipped"
        return text

    def values(self, field: str) -> list[str]:
        """The distinct values of a mark's field (experiment, transform, test), sorted."""
        if field == "test":
            return sorted({t for m in self.marks for t in m.tests})
        return sorted({getattr(m, field) for m in self.marks})


def load_matrix(
    tracking_uri: str,
    experiments: Sequence[str] | None = None,
    ui_url: str = DEFAULT_UI_URL,
    skipped: Sequence[CellResult] = (),
    experiment: str = "",
) -> Matrix:
    """Read the store's newest finished run of each cell (per experiment) and lay out its
    verdicts: a dataset verdict hides the tests it combined until a filter asks for them. A
    cell whose newest run failed shows its error; ``skipped`` (a grid's outcomes, of
    ``experiment``) adds the cells the grid skipped with its reason."""
    raw = all_runs(tracking_uri, experiments)
    frame = latest_finished(raw, ("experiment",))
    failed = latest_failed(raw, ("experiment",))
    left = [o for o in skipped if o.status == SKIPPED and not o.run_id and o.message]
    if frame.empty and failed.empty and not left:
        return Matrix([], [], [])
    if not frame.empty:
        frame = frame[frame["verdict"].isin(VERDICTS)].reset_index(drop=True)
    ids, combined = _ids_and_verdict_tags(tracking_uri)
    q_values, notes = _grid_q(frame) if not frame.empty else ({}, [])
    by_id = {str(row["run_id"]): row for _, row in frame.iterrows()}
    judged = {
        _group(row)
        for _, row in frame.iterrows()
        if row["test"] == DATASET_TEST and _has_tests(row)
    }
    marks = []
    for run_id, row in by_id.items():
        verdict_run = row["test"] == DATASET_TEST
        tags = combined.get(run_id, {})
        q = q_values.get(run_id)
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
                title=(_verdict_title(row, tags, by_id, q) if verdict_run else _test_title(row)),
                main=_has_tests(row) if verdict_run else _group(row) not in judged,
                numbers=(
                    _verdict_numbers(row, tags, by_id, q) if verdict_run else _test_numbers(row)
                ),
            )
        )
    alike: dict[tuple[str, ...], list[pd.Series]] = {}
    for _, row in failed.iterrows():
        error = tag(row, "error") or "the run failed without an error message"
        alike.setdefault((*_group(row), error), []).append(row)
    for (*_, error), rows in alike.items():  # one mark per cell and error, naming its tests
        row, run_id = rows[0], str(rows[0]["run_id"])
        tests = [str(r["test"]) for r in rows]
        runs = ", ".join(f"{r['test']}: run {r['run_id']}" for r in rows)
        marks.append(
            Mark(
                model=str(row["model"]),
                dataset=str(row["dataset"]),
                test=tests[0],
                transform=str(row["transform"]),
                experiment=str(row["experiment"]),
                verdict=FAILED,
                run_id=run_id,
                url=run_url(ui_url, ids[str(row["experiment"])], run_id),
                title=f"{row['model']} × {row['dataset']}: {', '.join(tests)} failed\n"
                f"{error}\nexperiment {row['experiment']}, transform {row['transform']}; {runs}",
                main=True,
                numbers=(_cut(f"error: {error}"),),
                also=tuple(tests[1:]),
            )
        )
    gone: dict[tuple[str, str, str, str], list[CellResult]] = {}
    for outcome in left:
        key = (outcome.model, outcome.dataset, outcome.transform, outcome.message)
        gone.setdefault(key, []).append(outcome)
    for (model, dataset, transform, reason), found in gone.items():
        tests = [o.test for o in found]
        marks.append(
            Mark(
                model=model,
                dataset=dataset,
                test=tests[0],
                transform=transform,
                experiment=experiment,
                verdict=SKIPPED,
                run_id="",
                url="",
                title=f"{model} × {dataset}: {', '.join(tests)} skipped by the grid\n{reason}",
                main=True,
                numbers=(_cut(f"skipped: {reason}"),),
                also=tuple(tests[1:]),
            )
        )
    models = sorted({m.model for m in marks})
    present = {m.dataset for m in marks}
    ordered = [d for d in paper_datasets() if d in present]
    shown = sorted({m.experiment for m in marks if m.experiment in ids})
    links = {e: experiment_url(ui_url, ids[e]) for e in shown}
    return Matrix(models, [*ordered, *sorted(present - set(ordered))], marks, notes, links)


def _has_tests(row: pd.Series) -> bool:
    """Whether a dataset verdict combined any test (one over tests that all failed did not,
    and the failed tests show instead)."""
    n = number(row, "n_tests")
    return n is None or n > 0


def _cut(text: str, limit: int = REASON_CHARS) -> str:
    """``text`` up to ``limit`` characters, cut at a word with "…" where it was longer."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


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
    for test, run_id in combined_runs(tags).items():
        member = by_id.get(run_id)
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


def _test_numbers(run: pd.Series) -> tuple[str, ...]:
    """What a test's mark prints: hits, baseline, p-value; why it did not apply."""
    if run["verdict"] == Verdict.NOT_APPLICABLE.value:
        return (_cut(f"n/a: {tag(run, 'reason')}"),) if tag(run, "reason") else ()
    return (_counts(run),)


def _verdict_numbers(
    run: pd.Series, tags: dict[str, str], by_id: dict[str, pd.Series], q: float | None
) -> tuple[str, ...]:
    """What a dataset verdict's mark prints: combined p and grid q, the tests that carry it,
    and each combined test's mark and hits (with the p it entered as, where its verdict
    raised it)."""
    carried = tags.get("carried_by", "").replace(",", ", ") or "no single test"
    members = []
    for test, run_id in combined_runs(tags).items():
        member = by_id.get(run_id)
        verdict = tags.get(f"test.{test}.verdict", "")
        text = f"{MARKS.get(verdict) or STATE_MARKS.get(verdict, '?')} {test}"
        if member is not None:
            text += f" {hits(member)}"
        entered = number(run, f"entered_p.{test}")
        if entered is not None and entered != number(run, f"p_value.{test}"):
            text += f" (entered as p = {_p(entered)})"
        members.append(text)
    lines = [f"p = {_p(number(run, 'p_value'))}, grid q = {_p(q)}", f"carried by {carried}"]
    if members:
        lines.append(" · ".join(members))
    return tuple(lines)


STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
h2 { font-size: 1.15em; margin: 1.4em 0 .4em; }
.meta, .how { color: #555; margin: .2em 0; max-width: 70em; }
.filters { margin: 1em 0; display: flex; gap: 1.2em; flex-wrap: wrap; }
.filters label { font-weight: 600; }
table.matrix, table.compare { border-collapse: collapse; }
.matrix th, .matrix td, .compare th, .compare td { border: 1px solid #ccc; padding: .35em .5em;
  vertical-align: top; }
.matrix thead th, .compare thead th { background: #f3f3f3; }
.matrix tbody th, .compare tbody th { text-align: left; background: #fafafa; white-space: nowrap;
  vertical-align: middle; }
.matrix td.empty::after, .compare td.empty::after { content: "–"; color: #aaa; }
a.mark { display: block; margin: .15em 0; padding: .2em .45em; border-radius: .3em;
  text-decoration: none; color: #fff; font-size: .92em; max-width: 24em; }
a.mark[hidden] { display: none; }
a.mark .label { white-space: nowrap; }
a.mark.failed .label, a.mark.skipped .label { white-space: normal; }
a.mark.dataset .label { font-weight: 700; font-size: 1.05em; }
a.mark .numbers { display: block; font-size: .85em; line-height: 1.3; opacity: .95; }
.evidence { background: #c62828; }
.ambiguous { background: #f9a825; color: #222 !important; }
.no_evidence { background: #2e7d32; }
.not_applicable { background: #9e9e9e; }
.failed { background: #fff; color: #b71c1c !important; border: 2px dashed #b71c1c; }
.skipped { background: #fff; color: #555 !important; border: 1px dashed #888; }
.legend span { display: inline-block; margin-right: .6em; padding: .1em .45em;
  border-radius: .3em; color: #fff; }
* { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
@media print {
  body { margin: 0; font-size: 11px; }
  .filters { display: none; }
  a.mark { max-width: none; }
}
"""

SCRIPT = """
function applyFilters() {
  const pick = id => document.getElementById(id).value;
  const experiment = pick('experiment'), transform = pick('transform'), test = pick('test');
  for (const a of document.querySelectorAll('table.matrix a.mark')) {
    const d = a.dataset;
    const byTest = test === '' ? d.main === '1'
      : test === '*' || d.test.split(' ').includes(test);
    a.hidden = !(byTest && (!experiment || d.experiment === experiment)
      && (!transform || d.transform === transform));
  }
  for (const td of document.querySelectorAll('table.matrix td.cell')) {
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
        "test": " ".join(mark.tests),
        "main": "1" if mark.main else "0",
        "run-id": mark.run_id,
    }
    attributes = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in data.items())
    kind = " dataset" if mark.test == DATASET_TEST else ""
    href = f' href="{html.escape(mark.url)}"' if mark.url else ""
    numbers = "".join(f'<span class="numbers">{html.escape(n)}</span>' for n in mark.numbers)
    return (
        f'<a class="mark {html.escape(mark.verdict)}{kind}"{href} '
        f'title="{html.escape(mark.title)}" {attributes}>'
        f'<span class="label">{html.escape(mark.label)}</span>{numbers}</a>'
    )


def _compare_html(matrix: Matrix, models: Sequence[str]) -> str:
    """Two models side by side on the files both ran: per experiment, dataset and transform,
    the dataset verdict, then each test, every mark with its numbers."""
    first, second = models
    rows = []
    alone: dict[str, list[str]] = {first: [], second: []}
    groups = sorted({(m.experiment, m.dataset, m.transform) for m in matrix.marks})
    for experiment, dataset, transform in groups:
        marks = {
            model: {
                test: m
                for m in matrix.cell(model, dataset)
                if (m.experiment, m.transform) == (experiment, transform)
                for test in m.tests
            }
            for model in (first, second)
        }
        if not marks[first] or not marks[second]:
            for model in (first, second):
                if marks[model]:
                    alone[model].append(dataset)
            continue
        tests = sorted({*marks[first], *marks[second]}, key=lambda t: (t != DATASET_TEST, t))
        where = dataset + ("" if transform == "original" else f" · {transform}")
        where += f" ({experiment})" if len(matrix.values("experiment")) > 1 else ""
        for i, test in enumerate(tests):
            head = f'<th rowspan="{len(tests)}">{html.escape(where)}</th>' if i == 0 else ""
            name = "dataset verdict" if test == DATASET_TEST else test
            cells = "".join(
                f'<td class="cell">{_mark_html(marks[m][test])}</td>'
                if test in marks[m]
                else '<td class="cell empty"></td>'
                for m in (first, second)
            )
            rows.append(f"<tr>{head}<td>{html.escape(name)}</td>{cells}</tr>")
    notes = "".join(
        f'<p class="how">Only {html.escape(model)} ran: '
        f"{html.escape(', '.join(sorted(set(found))))}.</p>"
        for model, found in alone.items()
        if found
    )
    if not rows:
        return (
            f"<h2>{html.escape(first)} beside {html.escape(second)}</h2>"
            "<p>The two models share no file on this page.</p>" + notes
        )
    return (
        f"<h2>{html.escape(first)} beside {html.escape(second)}, on the files both ran</h2>"
        '<table class="compare"><thead><tr><th>dataset</th><th>test</th>'
        f"<th>{html.escape(first)}</th><th>{html.escape(second)}</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{notes}"
    )


def render(matrix: Matrix, source: str, compare: Sequence[str] = ()) -> str:
    """The page: filters, legend and the matrix, with its style and script inline; with
    ``compare`` (two models), the two side by side after the matrix."""
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
    legend += "".join(f'<span class="{v}">{STATE_MARKS[v]} {v}</span>' for v in STATE_MARKS)
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
    links = ", ".join(
        f'<a href="{html.escape(url)}">{html.escape(name)}</a>'
        for name, url in matrix.links.items()
    )
    body = (
        "<h1>Who memorized what</h1>"
        f'<p class="meta">{matrix.counts}; from {html.escape(source)}, {when}.</p>'
        '<p class="how">Each cell is the dataset verdict of the model on the dataset (its tests '
        "of rows seen, combined: p-value, grid q-value, the tests that carry it and each "
        "test's hits); where there is none, each test's own verdict with its hits, baseline "
        "and p-value. A failed test shows its error, a test the grid skipped its reason. Click "
        "a mark to open its run in the MLflow UI (start it first: make ui, or mlflow ui "
        "--backend-store-uri with the store above).</p>"
        f"{notes}"
        + (f'<p class="how runs">Runs in the MLflow UI: {links}.</p>' if links else "")
        + f'<div class="filters">{"".join(filters)}</div>'
        f'<p class="legend">{legend}</p>'
        f'<table class="matrix"><thead><tr><th>model \\ dataset</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    if not matrix.marks:
        body += "<p>No finished run with a verdict in this store.</p>"
    if compare:
        body += _compare_html(matrix, compare)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>tabmem: who memorized what</title>"
        f"<style>{STYLE}</style></head><body>{body}<script>{SCRIPT}</script></body></html>\n"
    )


def write_page(
    tracking_uri: str,
    out: Path,
    experiments: Sequence[str] | None = None,
    ui_url: str | None = None,
    compare: Sequence[str] = (),
    skipped: Sequence[CellResult] = (),
) -> Matrix:
    """Write the page of the store's runs (``experiments``, else all) to ``out``, its marks
    linking to ``ui_url`` (default: ``ui_url_for`` the store); ``compare`` names two models
    to set side by side; ``skipped`` are a grid's outcomes (its one experiment's), whose skipped
    cells the page shows with their reason. Its matrix."""
    if compare and len(compare) != 2:
        from tabmem.errors import ConfigError

        raise ConfigError(f"--compare takes two models, A,B; not {', '.join(compare)}.")
    experiment = experiments[0] if experiments and len(experiments) == 1 else ""
    matrix = load_matrix(
        tracking_uri, experiments, ui_url or ui_url_for(tracking_uri), skipped, experiment
    )
    unknown = [m for m in compare if m not in matrix.models]
    if unknown:
        from tabmem.errors import ConfigError

        listed = ", ".join(matrix.models) or "none"
        raise ConfigError(
            f"--compare: no run of {', '.join(unknown)} on this page; its models: {listed}."
        )
    source = tracking_uri + (f" (experiments: {', '.join(experiments)})" if experiments else "")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(matrix, source, compare), encoding="utf-8")
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
