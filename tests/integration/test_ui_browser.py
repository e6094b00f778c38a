"""The MLflow UI in a real browser, as a user meets it after a sweep.

``make ui-serve`` (what ``make ui`` runs) serves a small real sweep's store on a free port; a
headless Chromium opens the experiment at the address ``make ui`` prints, finds a run by its
verdict, opens it and finds one of its queries' completions in its Traces tab. The three views
are saved as PNG files: into ``$TABMEM_UI_SCREENSHOTS`` when set (the README's pictures come
from ``TABMEM_UI_SCREENSHOTS=docs/ui``), else into the test's temporary folder.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest
from cdp import Browser, find_browser
from mlflow.tracking import MlflowClient

from tabmem.tracking.ui_links import experiment_url

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = "ui-test"  # the experiment of the ui_sweep fixture (conftest.py)
START_TIMEOUT = 300  # seconds: MLflow's server imports slowly on a busy machine


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_served(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"make ui-serve stopped: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(2)
    pytest.fail(f"the MLflow UI did not answer within {START_TIMEOUT} s: {log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def ui_server(ui_sweep, tmp_path_factory):
    """``make ui-serve`` over the sweep's store; its base address."""
    port = _free_port()
    log = tmp_path_factory.mktemp("ui-server") / "server.log"
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    with log.open("w") as sink:
        server = subprocess.Popen(
            [
                "make",
                "--no-print-directory",
                "ui-serve",
                f"PY={sys.executable}",
                f"UI_PORT={port}",
                f"UI_STORE={ui_sweep}",
                "UI_WORKERS=1",
            ],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_served(base, server, log)
        yield base, log
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


@pytest.fixture
def browser():
    executable = find_browser()
    if executable is None:
        pytest.skip(
            "no Chromium on this machine: install Debian's chromium package "
            "(make test does so when run as root)"
        )
    opened = Browser(executable, width=1600, height=1000)
    yield opened
    opened.close()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_a_user_finds_a_run_by_its_verdict_and_a_query_in_its_traces(ui_sweep, ui_server, browser):
    base, log = ui_server
    shots = Path(os.environ.get("TABMEM_UI_SCREENSHOTS") or ui_sweep / "screenshots")
    client = MlflowClient(f"sqlite:///{ui_sweep / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    url = experiment_url(base, experiment.experiment_id)
    assert url in log.read_text(), "make ui-serve did not print the experiment's address"

    browser.open(url)
    listed = browser.wait_for_text("evidence · oracle-memorizer · iris · header", 120)
    # MLflow's assistant opens beside every page at first; a user closes it once, as here.
    if browser.click_if_present('button[aria-label="Close"]'):
        time.sleep(1)
    assert "no_evidence · oracle-null · iris · header" in listed
    assert "Duration" in listed
    browser.screenshot(shots / "runs.png")

    browser.click_text("a", "evidence · oracle-memorizer")
    page = browser.wait_for_text("Description", 120)
    run = client.search_runs(
        [experiment.experiment_id], filter_string="tags.model = 'oracle-memorizer'"
    )[0]
    assert run.info.run_id in browser.evaluate("location.href")
    assert _one_line(run.data.tags["reason"]) in _one_line(page)
    browser.screenshot(shots / "run.png")

    browser.click_text("[role=tab]", "Traces")
    traces = browser.wait_for_text("Execution time", 120)
    mlflow.set_tracking_uri(f"sqlite:///{ui_sweep / 'mlflow.db'}")
    completion = (
        mlflow.search_traces(
            locations=[experiment.experiment_id], run_id=run.info.run_id, return_type="list"
        )[0]
        .data.spans[0]
        .outputs
    )
    assert _one_line(completion)[:40] in _one_line(traces)
    for column in ("Request", "Response", "expected", "score"):
        assert column in traces
    browser.screenshot(shots / "traces.png")
