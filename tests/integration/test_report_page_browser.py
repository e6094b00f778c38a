"""The page of who memorized what in a real browser, as a user opens it after a grid.

A small real grid (a memorizer and a null model × iris, wine × two tests of rows seen, so every
model × dataset has a dataset verdict) runs in this process; its summary writes the page into
the grid's folder, and ``tabmem report`` writes it again with marks linking to a local folder.
A headless Chromium opens the page from disk, reads the matrix, filters it and clicks a mark.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cdp import Browser, find_browser
from harness import ONE_PROCESS
from mlflow.tracking import MlflowClient

from tabmem.cli import main as tabmem
from tabmem.main import run
from tabmem.report.page import PAGE_NAME, pages_experiment

EXPERIMENT = "report-page"
MODELS = ("oracle-memorizer", "oracle-null")
DATASETS = ("iris", "wine")
EXPECTED = {"oracle-memorizer": "evidence", "oracle-null": "no_evidence"}

# Each row's cells as the page shows them: the visible marks' verdict class, test and title.
READ_MATRIX = """
[...document.querySelectorAll('tr[data-model]')].map(tr => [tr.dataset.model,
  [...tr.querySelectorAll('td.cell')].map(td => [td.dataset.dataset,
    [...td.querySelectorAll('a.mark')].filter(a => !a.hidden && a.offsetParent).map(a =>
      ({verdict: a.classList[1], test: a.dataset.test, title: a.title, href: a.href}))])])
"""


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> tuple[Path, Path]:
    """The grid's outputs folder and the page its summary wrote."""
    outputs = tmp_path_factory.mktemp("report-outputs")
    status = run(
        [
            "-m",
            f"model={','.join(MODELS)}",
            f"dataset={','.join(DATASETS)}",
            "test=header,row_completion",
            ONE_PROCESS,
            f"outputs_dir={outputs}",
            f"experiment={EXPERIMENT}",
            "progress=false",
            "show_queries=false",
            "tracking.traces=false",  # the page reads runs, not their queries
        ]
    )
    assert status == 0
    (page,) = outputs.glob("multirun/*/*/report.html")
    return outputs, page


@pytest.fixture
def browser():
    executable = find_browser()
    if executable is None:
        pytest.skip("no Chromium on this machine: install Debian's chromium (make browser)")
    opened = Browser(executable, width=1200, height=800)
    yield opened
    opened.close()


def _matrix(browser: Browser) -> dict[str, dict[str, list[dict[str, str]]]]:
    return {model: dict(cells) for model, cells in browser.evaluate(READ_MATRIX)}


def _choose(browser: Browser, select: str, value: str) -> None:
    browser.evaluate(
        f"(() => {{ const s = document.getElementById({json.dumps(select)});"
        f" s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()"
    )


def test_the_grid_page_shows_who_memorized_what_and_links_each_mark_to_its_run(
    grid, browser, tmp_path
):
    outputs, grid_page = grid
    client = MlflowClient(f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    verdicts = {
        (r.data.tags["model"], r.data.tags["dataset"]): r
        for r in client.search_runs([experiment.experiment_id], "tags.scope = 'dataset'")
    }
    assert set(verdicts) == {(m, d) for m in MODELS for d in DATASETS}

    # The page the grid wrote: its marks link to the runs in the UI make ui serves.
    browser.open(grid_page.as_uri())
    browser.wait_for_text("Who memorized what")
    shown = _matrix(browser)
    assert set(shown) == set(MODELS)
    for model in MODELS:
        assert set(shown[model]) == set(DATASETS)
        for dataset in DATASETS:
            (mark,) = shown[model][dataset]  # the dataset verdict alone
            run_id = verdicts[model, dataset].info.run_id
            assert mark["test"] == "dataset"
            assert mark["verdict"] == EXPECTED[model]
            assert mark["href"] == (
                f"http://127.0.0.1:5000/#/experiments/{experiment.experiment_id}/runs/{run_id}"
            )
    assert "carried by row_completion" in shown["oracle-memorizer"]["iris"][0]["title"]
    assert "hits 25/25" in shown["oracle-memorizer"]["iris"][0]["title"]
    assert "hits 0/25" in shown["oracle-null"]["wine"][0]["title"]
    assert browser.evaluate("performance.getEntriesByType('resource').length") == 0

    # tabmem report on the same store, its marks linking to a local folder a browser can open.
    ui = tmp_path / "ui"
    ui.mkdir()
    page = tmp_path / "report.html"
    assert tabmem(["report", "--tracking-uri", f"sqlite:///{outputs / 'mlflow.db'}",
                   "--ui-url", ui.as_uri(), "--out", str(page)]) == 0  # fmt: skip
    browser.open(page.as_uri())
    browser.wait_for_text("Who memorized what")
    _choose(browser, "test", "header")
    headers = _matrix(browser)
    for model in MODELS:
        for dataset in DATASETS:
            (mark,) = headers[model][dataset]
            assert (mark["test"], mark["verdict"]) == ("header", EXPECTED[model])
    _choose(browser, "test", "*")
    assert all(len(cell) == 3 for row in _matrix(browser).values() for cell in row.values())

    _choose(browser, "test", "")
    browser.click_text("tr[data-model='oracle-null'] td[data-dataset='wine'] a", "no evidence")
    run_id = verdicts["oracle-null", "wine"].info.run_id
    assert browser.wait_for_location(run_id) == (
        f"{ui.as_uri()}/#/experiments/{experiment.experiment_id}/runs/{run_id}"
    )


def test_the_grid_logs_its_page_as_an_mlflow_artifact(grid, tmp_path):
    outputs, grid_page = grid
    client = MlflowClient(f"sqlite:///{outputs / 'mlflow.db'}")
    pages = client.get_experiment_by_name(pages_experiment(EXPERIMENT))
    assert pages is not None
    (logged,) = client.search_runs([pages.experiment_id])
    assert logged.info.status == "FINISHED"
    assert logged.data.tags["report_of"] == EXPERIMENT
    assert logged.data.tags["grid_folder"] == str(grid_page.parent)
    assert grid_page.parent.name in logged.info.run_name
    downloaded = client.download_artifacts(logged.info.run_id, PAGE_NAME, str(tmp_path))
    text = Path(downloaded).read_text(encoding="utf-8")
    assert text == grid_page.read_text(encoding="utf-8")
    assert all(f'data-model="{model}"' in text for model in MODELS)
    # the cells' own experiment holds the cells and their dataset verdicts, nothing else
    cells = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    assert all("test" in r.data.tags for r in cells)
