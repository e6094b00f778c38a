"""A team's tracking server, set the way MLflow users set it: ``MLFLOW_TRACKING_URI``.

A real ``mlflow server`` on 127.0.0.1 (SQLite behind it, artifacts served by it) takes a cell
run with the ``tabmem`` command; the run, its traces, its artifacts and its dataset input
arrive there, and no store is created in the outputs folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tabmem.data import dataset_specs, load_dataset
from tabmem.tracking.inputs import DIGEST_CHARS

START_TIMEOUT = 300  # seconds: MLflow's server imports slowly on a busy machine


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``mlflow server`` on a free port; its address."""
    folder = tmp_path_factory.mktemp("tracking-server")
    port = _free_port()
    log = folder / "server.log"
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{folder / 'server.db'}"]
    command += ["--artifacts-destination", str(folder / "artifacts")]
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"mlflow server stopped: {log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"mlflow server silent for {START_TIMEOUT} s: {log.read_text()}")
                time.sleep(1)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def _tabmem() -> str:
    found = shutil.which("tabmem", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("no tabmem command beside this Python: pip install -e . installs it")
    return found


def test_a_run_goes_to_the_server_mlflow_tracking_uri_names(server, tmp_path):
    outputs = tmp_path / "outputs"
    env = {**os.environ, "MLFLOW_TRACKING_URI": server, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    args = ["model=oracle-memorizer", "dataset=iris", "test=header", "experiment=shared"]
    args += [f"outputs_dir={outputs}", "progress=false", "show_queries=false"]
    done = subprocess.run(
        [_tabmem(), "run", *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"experiment 'shared' in {server}" in done.stdout
    assert not (outputs / "mlflow.db").exists() and not (outputs / "mlartifacts").exists()
    client = MlflowClient(tracking_uri=server)
    experiment = client.get_experiment_by_name("shared")
    [run] = client.search_runs([experiment.experiment_id])
    assert run.data.tags["verdict"] == "evidence"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"config.yaml"}
    traces = client.search_traces(locations=[experiment.experiment_id], max_results=100)
    assert len(traces) == int(run.data.metrics["n_queries"]) > 0
    [logged] = run.inputs.dataset_inputs
    iris = load_dataset(dataset_specs()["iris"])
    assert logged.dataset.name == "iris"
    assert len(logged.dataset.digest) == DIGEST_CHARS
    assert {t.key: t.value for t in logged.tags}["tabmem.transform"] == "original"
    assert str(iris.path) in logged.dataset.source


def test_run_help_lists_the_config_groups():
    done = subprocess.run([_tabmem(), "run", "--help"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "== Config groups" in done.stdout and "budget_usd=5" in done.stdout
