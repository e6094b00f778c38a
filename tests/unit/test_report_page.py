"""The page of who memorized what, built from a real MLflow store: which marks each model ×
dataset shows, where they link, what their hover text says, and a page that needs nothing else."""

from __future__ import annotations

import html
import re

import pytest

from tabmem.cell import Cell
from tabmem.report.dataset_verdicts import dataset_outcomes
from tabmem.report.page import load_matrix, render, ui_url_for, write_page
from tabmem.results import CellResult
from tabmem.stats.combine import DatasetRule, benjamini_hochberg
from tabmem.tracking.store import TrackingStore

UI = "http://ui.example:5000"


def _log(store, model, dataset, test, verdict, transform="original", **metrics) -> CellResult:
    """One finished test run in ``store``; its outcome, as the runner reports it."""
    cell = Cell(model, dataset, test, transform)
    reason = f"{test} said {verdict} (p < 0.01)"
    tags = {**cell.tags(), "verdict": verdict, "reason": reason}
    run_id = store.log_cell(f"{verdict} · {model}", tags, {}, metrics, {}, {}, failed=False)
    group = f"{model}|{dataset}|{transform}|0"
    p = metrics.get("p_value")
    return CellResult(
        model, dataset, test, transform, "finished", verdict, "", run_id, "", p, 0, group
    )


@pytest.fixture
def store_uri(tmp_path):
    """Experiment a: a memorizer on iris (two tests of rows seen, so a dataset verdict) and a
    null model on wine and on a user's file (one test each, no dataset verdict); experiment b:
    the memorizer's header on iris again, perturbed."""
    a = TrackingStore.at(tmp_path, "a")
    memorized = [
        _log(
            a,
            "memorizer",
            "iris",
            "header",
            "evidence",
            n_hits=4,
            n_queries=4,
            baseline=0.02,
            p_value=1.6e-7,
        ),
        _log(
            a,
            "memorizer",
            "iris",
            "row_completion",
            "evidence",
            n_hits=25,
            n_queries=25,
            baseline=0.02,
            p_value=3e-43,
        ),
    ]
    (verdict,) = dataset_outcomes(memorized, DatasetRule(), a)
    assert verdict.verdict.verdict.value == "evidence"
    _log(
        a,
        "null",
        "wine",
        "row_completion",
        "no_evidence",
        n_hits=0,
        n_queries=25,
        baseline=0.006,
        p_value=1.0,
    )
    _log(a, "null", "my-file", "header", "not_applicable", n_hits=0, n_queries=0)
    b = TrackingStore.at(tmp_path, "b")
    _log(b, "memorizer", "iris", "header", "ambiguous", "perturbed", n_hits=1, n_queries=4)
    return a.uri, {"a": a.experiment_id, "b": b.experiment_id}, verdict.run_id


def test_each_model_and_dataset_shows_its_dataset_verdict_else_its_tests(store_uri):
    uri, ids, verdict_run = store_uri
    matrix = load_matrix(uri, ui_url=UI)
    assert matrix.models == ["memorizer", "null"]
    assert matrix.datasets == ["iris", "wine", "my-file"]  # the paper's order, then the rest
    main = {(m.model, m.dataset, m.experiment, m.test): m for m in matrix.marks if m.main}
    assert set(main) == {
        ("memorizer", "iris", "a", "dataset"),
        ("memorizer", "iris", "b", "header"),  # experiment b has no dataset verdict
        ("null", "wine", "a", "row_completion"),
        ("null", "my-file", "a", "header"),
    }
    hidden = sorted(m.test for m in matrix.marks if not m.main)
    assert hidden == ["header", "row_completion"]  # behind memorizer × iris's dataset verdict
    assert matrix.cell("null", "iris") == []
    assert [m.test for m in matrix.cell("memorizer", "iris")] == [
        "dataset",
        "header",
        "row_completion",
        "header",
    ]

    verdict = main["memorizer", "iris", "a", "dataset"]
    assert verdict.verdict == "evidence"
    assert verdict.run_id == verdict_run
    assert verdict.url == f"{UI}/#/experiments/{ids['a']}/runs/{verdict_run}"
    assert "carried by row_completion" in verdict.title
    assert "row_completion: evidence, hits 25/25, baseline 0.02, p = 3e-43" in verdict.title
    assert "header: evidence, hits 4/4, baseline 0.02, p = 1.6e-07" in verdict.title
    assert verdict.label == "✓ evidence"

    null = main["null", "wine", "a", "row_completion"]
    assert (null.verdict, null.label) == ("no_evidence", "✗ row_completion")
    assert "hits 0/25, baseline 0.006, p = 1" in null.title
    perturbed = main["memorizer", "iris", "b", "header"]
    assert (perturbed.transform, perturbed.label) == ("perturbed", "? header · perturbed")
    assert perturbed.url.startswith(f"{UI}/#/experiments/{ids['b']}/runs/")
    assert main["null", "my-file", "a", "header"].verdict == "not_applicable"


def test_one_experiment_alone(store_uri):
    uri, _, _ = store_uri
    matrix = load_matrix(uri, ["b"])
    assert (matrix.models, matrix.datasets) == (["memorizer"], ["iris"])
    (mark,) = matrix.marks
    assert mark.main and mark.url.startswith("http://127.0.0.1:5000/#/experiments/")
    assert "1 model × 1 dataset; 0 dataset verdicts, 1 test run;" in render(matrix, uri)


def test_the_page_is_one_file_with_every_mark_filter_and_escaped_text(store_uri, tmp_path):
    uri, _, _ = store_uri
    out = tmp_path / "site" / "report.html"
    matrix = write_page(uri, out, ui_url=UI)
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Who memorized what" in page
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=|@import|url\(", page)  # nothing fetched
    assert page.count('<a class="mark ') == len(matrix.marks) == 6
    for mark in matrix.marks:
        assert f'href="{mark.url}"' in page
    assert 'class="mark evidence dataset"' in page
    assert 'data-main="0"' in page and 'data-main="1"' in page
    for select, values in {
        "experiment": ["a", "b"],
        "transform": ["original", "perturbed"],
        "test": ["*", "dataset", "header", "row_completion"],
    }.items():
        options = re.search(rf'<select id="{select}">(.*?)</select>', page).group(1)
        assert re.findall(r'value="([^"]*)"', options)[1:] == values  # after "all"
    assert "(p &lt; 0.01)" in page and "(p < 0.01)" not in page
    assert "2 models × 3 datasets; 1 dataset verdict, 5 test runs" in page


def test_an_empty_store_gives_an_empty_page(tmp_path):
    store = TrackingStore.at(tmp_path, "empty")
    assert store.experiment_id  # the store and its experiment exist, with no run
    out = tmp_path / "report.html"
    matrix = write_page(store.uri, out)
    assert (matrix.models, matrix.datasets, matrix.marks) == ([], [], [])
    assert "No finished run with a verdict in this store." in out.read_text(encoding="utf-8")


def test_marks_link_to_a_tracking_servers_own_ui_else_to_make_uis():
    assert ui_url_for("http://mlflow.example:5000/") == "http://mlflow.example:5000"
    assert ui_url_for("https://mlflow.example") == "https://mlflow.example"
    assert ui_url_for("sqlite:////tmp/outputs/mlflow.db") == "http://127.0.0.1:5000"


def test_a_grids_dataset_verdicts_carry_their_q_value_in_mlflow_and_on_the_page(tmp_path):
    """Three model × dataset verdicts of one grid: each run's metric ``q_value`` is its
    Benjamini-Hochberg q over the three, the page shows it beside the combined p and says
    which error rate it controls; a test whose ambiguous verdict raised its p says so."""
    store = TrackingStore.at(tmp_path, "grid")
    outcomes = []
    for model, p_rows, verdict, p_header, header in (
        ("memorizer", 1e-6, "evidence", 1e-4, "evidence"),
        ("guesser", 0.004, "ambiguous", 0.5, "no_evidence"),  # p < 0.01 from too few hits
        ("null", 0.3, "no_evidence", 0.6, "no_evidence"),
    ):
        outcomes.append(_log(store, model, "iris", "row_completion", verdict, p_value=p_rows))
        outcomes.append(_log(store, model, "iris", "header", header, p_value=p_header))
    found = {o.model: o for o in dataset_outcomes(outcomes, DatasetRule(), store)}
    p = [found[m].verdict.p_value for m in ("memorizer", "guesser", "null")]
    assert p[0] < 1e-4 and p[1] > 0.01  # the guesser's 0.004 entered at alpha = 0.01
    runs = {m: store.client.get_run(o.run_id).data for m, o in found.items()}
    logged = [runs[m].metrics["q_value"] for m in ("memorizer", "guesser", "null")]
    assert logged == pytest.approx(benjamini_hochberg(p))
    assert logged[0] == pytest.approx(3 * p[0])  # the smallest of three: 3 p
    assert {run.metrics["q_family"] for run in runs.values()} == {3}
    guesser = runs["guesser"]
    assert guesser.metrics["p_value.row_completion"] == 0.004
    assert guesser.metrics["entered_p.row_completion"] == 0.01
    assert "false discovery rate" in guesser.tags["q_value_controls"]

    matrix = load_matrix(store.uri, ui_url=UI)
    titles = {m.model: m.title for m in matrix.marks if m.test == "dataset"}
    assert f"grid q = {logged[0]:.2g}" in titles["memorizer"]
    assert "row_completion: ambiguous" in titles["guesser"]
    assert "entered as p = 0.01" in titles["guesser"]
    assert "entered as" not in titles["memorizer"]
    page = render(matrix, store.uri)
    assert (
        "Experiment grid: grid q: Benjamini-Hochberg over the 3 dataset verdicts with a p-value; "
        "evidence where q &lt; 0.01 keeps the false discovery rate among them at 0.01"
    ) in page


def _visible(page: str) -> str:
    """The page's text as printed: tags and hover titles left out."""
    shown = re.sub(r'title="[^"]*"', "", page)
    shown = re.sub(r"<script>.*?</script>|<style>.*?</style>", "", shown, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", shown)))


def test_every_number_is_printed_not_only_in_the_hover_text(store_uri, tmp_path):
    uri, _, _ = store_uri
    out = tmp_path / "report.html"
    write_page(uri, out, ["a"], ui_url=UI)
    shown = _visible(out.read_text(encoding="utf-8"))
    # the dataset verdict: combined p, grid q, the tests that carry it, each test's hits
    assert re.search(r"p = [0-9.e-]+, grid q = [0-9.e-]+", shown)
    assert "carried by row_completion" in shown
    assert "row_completion 25/25" in shown and "header 4/4" in shown
    # a test of its own: hits, baseline, p
    assert "hits 0/25, baseline 0.006, p = 1" in shown


def test_failed_cells_are_shown_with_their_error_and_counted(tmp_path):
    store = TrackingStore.at(tmp_path, "grid")
    _log(store, "memorizer", "iris", "header", "evidence", n_hits=4, n_queries=4, p_value=1e-7)
    error = "Dataset 'fico' needs a file you provide: pass it with dataset.path=/path/to/fico.csv."
    for test in ("header", "row_completion"):
        tags = {**Cell("memorizer", "fico", test, "original").tags(), "verdict": "failed"}
        store.log_cell("failed · memorizer", {**tags, "error": error}, {}, {}, {}, {}, failed=True)
    out = tmp_path / "report.html"
    matrix = write_page(store.uri, out, ui_url=UI)
    assert matrix.datasets == ["iris", "fico"]  # the failed file is not left out
    assert matrix.counts == "1 model × 2 datasets; 0 dataset verdicts, 1 test run, 2 failed"
    (failed,) = [m for m in matrix.marks if m.verdict == "failed"]
    assert failed.main and failed.tests == ("header", "row_completion")
    assert failed.url.startswith(f"{UI}/#/experiments/")
    shown = _visible(out.read_text(encoding="utf-8"))
    assert "header, row_completion failed" in shown
    assert "error: Dataset 'fico' needs a file you provide" in shown


def test_a_grids_page_shows_the_cells_it_skipped_with_the_reason(tmp_path):
    store = TrackingStore.at(tmp_path, "paper")
    _log(store, "memorizer", "iris", "header", "evidence", n_hits=4, n_queries=4)
    reason = "dataset file not present: Dataset 'fico' needs a file you provide"
    skipped = [
        CellResult("memorizer", "fico", t, "original", "skipped", message=reason)
        for t in ("header", "row_completion")
    ]
    already = CellResult(
        "memorizer", "iris", "header", "original", "skipped", "evidence", "", "r1", "done"
    )
    out = tmp_path / "report.html"
    matrix = write_page(store.uri, out, ["paper"], ui_url=UI, skipped=[*skipped, already])
    (mark,) = [m for m in matrix.marks if m.verdict == "skipped"]
    assert (mark.model, mark.dataset, mark.tests) == (
        "memorizer",
        "fico",
        ("header", "row_completion"),
    )
    assert "2 skipped" in matrix.counts
    assert f"skipped: {reason}" in _visible(out.read_text(encoding="utf-8"))


def test_two_models_side_by_side_and_each_experiments_runs_list(store_uri, tmp_path):
    uri, ids, _ = store_uri
    out = tmp_path / "report.html"
    write_page(uri, out, ["a"], ui_url=UI, compare=["memorizer", "null"])
    page = out.read_text(encoding="utf-8")
    assert f'href="{UI}/#/experiments/{ids["a"]}?workflowType=machine_learning"' in page
    # the two models share no file in experiment a: the page says which ran what
    assert "The two models share no file on this page." in page
    assert "Only memorizer ran: iris." in page and "Only null ran: my-file, wine." in page
    store = TrackingStore.at(tmp_path / "b", "both")
    for model, verdict, hits in (("memorizer", "evidence", 4), ("null", "no_evidence", 0)):
        _log(store, model, "iris", "header", verdict, n_hits=hits, n_queries=4, p_value=0.5)
    write_page(store.uri, out, ui_url=UI, compare=["memorizer", "null"])
    compare = out.read_text(encoding="utf-8").split('<table class="compare">', 1)[1]
    compare = _visible(compare.split("</table>", 1)[0])
    assert "iris header ✓ header hits 4/4" in compare and "✗ header hits 0/4" in compare
    with pytest.raises(Exception, match="no run of nobody"):
        write_page(store.uri, out, compare=["memorizer", "nobody"])
