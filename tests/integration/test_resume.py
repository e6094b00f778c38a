"""Crash and resume: a sweep killed with SIGKILL and started again asks nothing twice and ends
with the same MLflow results as a sweep that was never interrupted.

The server holds every request after the first few answers, so the kill lands while the
answers received so far are committed to the cache and the rest are still unanswered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from flaky_grid import (
    ROOT,
    mlflow_runs,
    sweep_command,
    sweep_env,
    sweep_here,
    write_model_config,
)
from flaky_server import FlakyServer
from harness import ONE_PROCESS

from tabmem.data import dataset_specs, load_dataset

GRID = ("-m", "model=resumable", "dataset=iris,titanic", "test=header")
ANSWERS_BEFORE_KILL = 3
CALL_METRICS = {"model_calls", "cache_hits", "retries", "failed_calls", "empty_answers"}
# How tokens split between fresh and cached answers (and so the cost) depends on when the
# kill came; their sums do not.
USAGE_METRICS = {
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "cached_completion_tokens",
    "evaluated_tokens",
    "reasoning_tokens",
    "provider_cached_prompt_tokens",  # the server's prompt cache saw other requests first
    "provider_cache_write_tokens",
    "cost_usd",
    "unpriced_answers",
    "uncounted_answers",
}
IGNORED_METRICS = CALL_METRICS | USAGE_METRICS


def wait_for(condition, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the sweep never reached the point where it is killed")
        time.sleep(0.05)


def kill_midway(server: FlakyServer, outputs: Path, conf: Path) -> list[str]:
    """Start the sweep, SIGKILL its whole process group while requests are held; return the
    keys answered before the kill."""
    server.hold_after(ANSWERS_BEFORE_KILL)
    before = len(server.answered)
    process = subprocess.Popen(
        sweep_command(outputs, conf, "resume", *GRID),
        cwd=ROOT,
        env=sweep_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: server.held() >= 1 and len(server.answered) - before >= ANSWERS_BEFORE_KILL
        )
        time.sleep(1.0)  # let the client write what it received
        answered = server.answered[before:]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL
    server.release()
    return answered


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An uninterrupted sweep, and a killed (processes, joblib's launcher) then resumed one,
    against the same server."""
    specs = dataset_specs()
    datasets = [load_dataset(specs[name]) for name in ("iris", "titanic")]
    conf = tmp_path_factory.mktemp("conf")
    whole = tmp_path_factory.mktemp("uninterrupted")
    crashed = tmp_path_factory.mktemp("crashed")
    with FlakyServer(datasets, latency=0.05) as server:
        write_model_config(conf, "resumable", server.base_url, max_concurrency=2)
        # the reference is any uninterrupted run of the grid: here, in this process
        reference = sweep_here(whole, conf, "resume", *GRID, ONE_PROCESS)
        assert reference.returncode == 0, reference.stderr[-3000:]
        all_keys = {a.key for a in server.arrivals}
        received = kill_midway(server, crashed, conf)
        seen_before_resume = server.request_count
        # the resume reads what the killed processes left on disk: here, in this process
        resumed = sweep_here(crashed, conf, "resume", *GRID, ONE_PROCESS)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        asked_again = [a.key for a in server.arrivals[seen_before_resume:]]
    return {
        "whole": whole,
        "crashed": crashed,
        "all_keys": all_keys,
        "received": received,
        "asked_again": asked_again,
        "resumed": resumed,
    }


def finished_by_cell(outputs: Path) -> dict[tuple[str, str], object]:
    found, _ = mlflow_runs(outputs, "resume")
    finished = [r for r in found if r.info.status == "FINISHED"]
    cells = {(r.data.tags["model"], r.data.tags["dataset"]): r for r in finished}
    assert len(cells) == len(finished), "a cell finished twice"
    return cells


def queries(outputs: Path, run) -> list[dict]:
    _, client = mlflow_runs(outputs, "resume")
    target = outputs / "download" / run.info.run_id
    target.mkdir(parents=True, exist_ok=True)
    path = client.download_artifacts(run.info.run_id, "queries.json", str(target))
    table = json.loads(Path(path).read_text())
    return [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]


def test_the_kill_came_after_some_answers_and_before_the_rest(runs):
    assert len(runs["received"]) == ANSWERS_BEFORE_KILL
    assert len(runs["all_keys"]) == 8


def test_no_answer_received_before_the_kill_is_asked_for_again(runs):
    asked_again = runs["asked_again"]
    assert not set(asked_again) & set(runs["received"])
    assert len(asked_again) == len(set(asked_again))
    assert set(asked_again) | set(runs["received"]) == runs["all_keys"]


def test_the_resumed_sweep_ends_with_the_same_results(runs):
    whole = finished_by_cell(runs["whole"])
    resumed = finished_by_cell(runs["crashed"])
    assert set(whole) == set(resumed) == {("resumable", "iris"), ("resumable", "titanic")}
    for cell, reference in whole.items():
        run = resumed[cell]
        assert run.data.tags["verdict"] == reference.data.tags["verdict"], cell
        assert run.data.tags["config_hash"] == reference.data.tags["config_hash"], cell
        kept = {k: v for k, v in reference.data.metrics.items() if k not in IGNORED_METRICS}
        assert {k: run.data.metrics[k] for k in kept} == kept, cell
        for side in ("prompt", "completion"):
            tokens = [
                m[f"{side}_tokens"] + m[f"cached_{side}_tokens"]
                for m in (run.data.metrics, reference.data.metrics)
            ]
            assert tokens[0] == tokens[1], (cell, side)
        assert queries(runs["crashed"], run) == queries(runs["whole"], reference), cell


def test_the_resumed_sweep_took_what_it_had_from_the_cache(runs):
    resumed = finished_by_cell(runs["crashed"])
    hits = sum(int(r.data.metrics["cache_hits"]) for r in resumed.values())
    calls = sum(int(r.data.metrics["model_calls"]) for r in resumed.values())
    assert calls == len(runs["asked_again"])
    assert hits + calls == 8
