"""``batch=true`` against a local server that speaks OpenAI's Batch API (``batch_server.py``).

A 2-cell grid sent as batches gives the verdicts and per-query scores of the same grid asked
live; a grid killed while its batches are pending, run again, reads the same batches back and
asks nothing twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from batch_server import BatchServer
from flaky_grid import (
    ROOT,
    mlflow_runs,
    sweep_command,
    sweep_env,
    sweep_here,
    write_model_config,
)
from harness import ONE_PROCESS

from tabmem.data import dataset_specs, load_dataset

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic")

EXPERIMENT = "batch"
GRID = ("-m", "model=m", "dataset=iris,titanic", "test=row_completion")


@pytest.fixture(scope="module")
def datasets():
    return [load_dataset(dataset_specs()[name]) for name in ("iris", "titanic")]


@pytest.fixture(scope="module")
def live(tmp_path_factory, datasets) -> tuple[Path, int]:
    """The grid asked live, once for the tests that compare batches with it: its outputs
    folder and the requests its server answered."""
    folder = tmp_path_factory.mktemp("live")
    with BatchServer(datasets) as server:
        write_model_config(folder / "conf", "m", server.base_url, timeout=30)
        done = sweep_here(folder / "outputs", folder / "conf", EXPERIMENT, *GRID, ONE_PROCESS)
        assert done.returncode == 0, done.stderr[-3000:]
        return folder / "outputs", server.request_count


def _scores(outputs: Path) -> dict[str, tuple[str, list]]:
    """Each cell's verdict and per-query scores, by dataset."""
    runs, client = mlflow_runs(outputs, EXPERIMENT)
    found = {}
    for run in runs:
        folder = outputs / "downloaded" / run.info.run_id
        folder.mkdir(parents=True, exist_ok=True)
        local = client.download_artifacts(run.info.run_id, "queries.json", str(folder))
        table = json.loads(Path(local).read_text())
        column = table["columns"].index("score")
        scores = [row[column] for row in table["data"]]
        found[run.data.tags["dataset"]] = (run.data.tags["verdict"], scores)
    return found


def test_a_batched_grid_gives_the_verdicts_and_scores_of_the_live_one(tmp_path, datasets, live):
    live_outputs, asked_live = live
    conf = tmp_path / "conf"
    with BatchServer(datasets) as server:
        write_model_config(conf, "m", server.base_url, batch_poll_seconds=0.1, timeout=30)
        batched = sweep_here(
            tmp_path / "batched", conf, EXPERIMENT, *GRID, "batch=true", ONE_PROCESS
        )
        assert batched.returncode == 0, batched.stderr[-3000:]
        assert server.request_count == 0  # nothing asked live in batch mode
        assert len(server.batches) >= 2 and server.lines_answered == asked_live
    live_scores, batch_scores = _scores(live_outputs), _scores(tmp_path / "batched")
    assert set(live_scores) == {"iris", "titanic"}
    assert batch_scores == live_scores
    assert all(verdict == "evidence" for verdict, _ in batch_scores.values())
    assert not list((tmp_path / "batched" / "batches").glob("*.json"))


def test_a_grid_killed_while_its_batches_are_pending_resumes_them(tmp_path, datasets):
    conf, outputs = tmp_path / "conf", tmp_path / "outputs"
    with BatchServer(datasets, hold=True) as server:
        write_model_config(conf, "m", server.base_url, batch_poll_seconds=0.1, timeout=30)
        with (tmp_path / "first.log").open("w") as log:
            first = subprocess.Popen(
                sweep_command(outputs, conf, EXPERIMENT, *GRID, "batch=true"),
                cwd=ROOT,
                env=sweep_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 300
        while len(server.batches) < 2 and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.2)
        assert len(server.batches) == 2, (tmp_path / "first.log").read_text()[-3000:]
        time.sleep(0.5)  # both ids written to disk right after their batches were created
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
        pending = set(server.batches)
        assert len(list((outputs / "batches").glob("*.json"))) == 2
        server.release.set()
        # the resume reads the batch ids the killed processes wrote: here, in this process
        again = sweep_here(outputs, conf, EXPERIMENT, *GRID, "batch=true", ONE_PROCESS)
        assert again.returncode == 0, again.stderr[-3000:]
        assert set(server.batches) == pending  # the same batches, none created again
        runs, _ = mlflow_runs(outputs, EXPERIMENT)
        finished = [r for r in runs if r.info.status == "FINISHED"]
        assert len(finished) == 2 and all(r.data.tags["verdict"] == "evidence" for r in finished)
        assert server.lines_answered == sum(r.data.metrics["model_calls"] for r in finished)
        assert server.request_count == 0
    assert not list((outputs / "batches").glob("*.json"))


def test_anthropic_message_batches_give_the_scores_of_live_queries(tmp_path, datasets, live):
    live_outputs, asked_live = live
    conf = tmp_path / "conf"
    with BatchServer(datasets) as server:
        write_model_config(
            conf,
            "claude",
            server.base_url,
            litellm_model="anthropic/oracle-memorizer",
            batch_poll_seconds=0.1,
            timeout=30,
        )
        claude_grid = ("-m", "model=claude", *GRID[2:])
        batched = sweep_here(
            tmp_path / "batched", conf, EXPERIMENT, *claude_grid, "batch=true", ONE_PROCESS
        )
        assert batched.returncode == 0, batched.stderr[-3000:]
        assert server.request_count == 0  # nothing asked live in batch mode
        assert {b["type"] for b in server.batches.values()} == {"message_batch"}
        assert server.lines_answered == asked_live
    assert _scores(tmp_path / "batched") == _scores(live_outputs)
