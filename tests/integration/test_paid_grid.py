"""A priced grid against a local OpenAI-compatible server that reports usage: plan, cap, resume.

The model ``priced`` is served by a local server and given a price in its config
(``input_cost_per_token`` / ``output_cost_per_token``). In order:

1. ``dry_run=true`` prints the bill and sends nothing (no request reaches the server, no MLflow
   store is made, and no socket is opened at all: a ``sitecustomize`` refuses every connect);
2. ``budget_usd`` at a third of that estimate stops the grid near the budget; the cells it
   stops are FAILED with "budget of $X reached after $Y";
3. a re-run with a larger budget finishes every cell from the cache plus what is left: no
   request is answered twice, and the tokens logged over both runs are those the server
   counted.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from flaky_grid import (
    ROOT,
    mlflow_runs,
    run_sweep,
    sweep_command,
    sweep_env,
    sweep_here,
    write_model_config,
)
from flaky_server import FlakyServer
from harness import ONE_PROCESS, settings_of

from tabmem.data import dataset_specs, load_dataset

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic")

EXPERIMENT = "paid-grid"
PRICES = {"input_cost_per_token": 1e-5, "output_cost_per_token": 3e-5}
GRID = ("-m", "model=priced", "dataset=iris,titanic", "test=row_completion,feature_completion")
QUERIES = {t: settings_of(t)["n_queries"] for t in ("row_completion", "feature_completion")}
NO_NETWORK = """
import os, socket

_connect = socket.socket.connect


def _refuse(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        with open(os.environ["TABMEM_TEST_CONNECTS"], "a") as log:
            log.write(repr(address) + "\\n")
        raise OSError(f"no network in a dry run: {address}")
    return _connect(self, address)


socket.socket.connect = _refuse
"""


@pytest.fixture(scope="module")
def server() -> Iterator[FlakyServer]:
    datasets = [load_dataset(dataset_specs()[name]) for name in ("iris", "titanic")]
    with FlakyServer(datasets, aliases={"priced": "oracle-memorizer"}) as flaky:
        yield flaky


def dry_run(outputs: Path, conf: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """A dry run in a process where every network connect is refused and logged; its cells in
    that process (planning is per cell: joblib's workers would only import everything again)."""
    guard = tmp_path / "guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(NO_NETWORK)
    connects = tmp_path / "connects.log"
    env = sweep_env(
        PYTHONPATH=os.pathsep.join([str(guard), os.environ.get("PYTHONPATH", "")]),
        TABMEM_TEST_CONNECTS=str(connects),
    )
    env.pop("OPENAI_API_KEY", None)
    result = subprocess.run(
        sweep_command(outputs, conf, EXPERIMENT, *args, "dry_run=true", ONE_PROCESS),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert not connects.exists(), connects.read_text()
    return result


def plans(outputs: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in outputs.glob("multirun/*/*/*/plan-*.json")]


def test_plan_then_budget_then_resume(server, tmp_path):
    conf = tmp_path / "conf"
    write_model_config(conf, "priced", server.base_url, served="priced", **PRICES)
    outputs = tmp_path / "outputs"

    planned = dry_run(outputs, conf, tmp_path, *GRID)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "tabmem dry run: nothing was sent" in planned.stdout
    assert server.request_count == 0
    assert not (outputs / "mlflow.db").exists()
    cells = plans(outputs)
    assert len(cells) == 4
    # at most n_queries a cell (a row feature completion cannot tell apart is not asked)
    assert all(0 < c["requests"] <= QUERIES[c["test"]] and c["cached"] == 0 for c in cells)
    planned_requests = sum(c["requests"] for c in cells)
    estimate = sum(c["estimated_usd"] for c in cells)
    assert estimate > 0
    assert f"{estimate:.4f}" in planned.stdout

    budget = estimate / 3
    capped = run_sweep(outputs, conf, EXPERIMENT, *GRID, f"budget_usd={budget}")
    assert capped.returncode == 1, capped.stdout + capped.stderr  # cells ended by the budget
    runs, _ = mlflow_runs(outputs, EXPERIMENT)
    failed = [r for r in runs if r.info.status == "FAILED"]
    assert failed, "a third of the estimate must stop the grid"
    assert all(r.data.tags["error"].startswith(f"budget of ${budget:.4f} reached") for r in failed)
    ledger = json.loads(next(outputs.glob("multirun/*/*/spend.json")).read_text())
    spent = sum(r.data.metrics.get("cost_usd", 0) for r in runs)
    assert ledger["spent_usd"] == pytest.approx(spent)
    most_per_answer = max(c["estimated_usd"] / c["requests"] for c in cells)
    in_flight = 2 * 4  # two cells at once, four workers each
    assert budget <= spent <= budget + in_flight * most_per_answer
    asked = server.request_count
    assert asked < planned_requests

    # the resume reads the cache and the ledger the capped processes left: in this process
    resumed = sweep_here(
        outputs, conf, EXPERIMENT, *GRID, f"budget_usd={10 * estimate}", ONE_PROCESS
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Spend: $" in resumed.stdout
    runs, _ = mlflow_runs(outputs, EXPERIMENT)
    finished = {
        (r.data.tags["dataset"], r.data.tags["test"])
        for r in runs
        if r.info.status == "FINISHED" and r.data.tags.get("scope") != "dataset"
    }
    assert len(finished) == 4
    assert (
        len(server.answered)
        == len(set(server.answered))
        == server.request_count
        == planned_requests
    )
    logged = {
        key: sum(r.data.metrics.get(key, 0) for r in runs)
        for key in ("prompt_tokens", "completion_tokens")
    }
    assert logged == server.usage_totals
    price = PRICES["input_cost_per_token"], PRICES["output_cost_per_token"]
    cost = sum(r.data.metrics.get("cost_usd", 0) for r in runs)
    assert cost == pytest.approx(
        price[0] * logged["prompt_tokens"] + price[1] * logged["completion_tokens"]
    )
    assert cost <= estimate


def test_a_dry_run_of_api_models_needs_no_key_and_no_network(server, tmp_path):
    conf = tmp_path / "conf"
    write_model_config(conf, "unpriced", server.base_url, served="unpriced")
    outputs = tmp_path / "outputs"
    grid = ("-m", "model=gpt-4,unpriced", "dataset=iris", "test=row_completion")
    asked = server.request_count
    planned = dry_run(outputs, conf, tmp_path, *grid)
    # the bill is complete without the key; the dry run says that a real run would stop for
    # it, and exits with status 1 as the real run would (issue 56)
    assert planned.returncode == 1, planned.stdout + planned.stderr
    assert planned.stderr.count("Model 'gpt-4' needs an API key in $OPENAI_API_KEY") == 1
    assert server.request_count == asked
    assert not (outputs / "mlflow.db").exists()
    by_model = {c["model"]: c for c in plans(outputs)}
    assert by_model["gpt-4"]["requests"] == 25 and by_model["gpt-4"]["estimated_usd"] > 0
    assert by_model["unpriced"]["estimated_usd"] is None
    assert "unknown price" in planned.stdout
    assert by_model["gpt-4"]["prompt_tokens"] > 25 * 100
