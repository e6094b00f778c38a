"""The in-process calibration agrees with the real grid: a sample of cells (three tests × a
hard negative and a partial memorizer × one file) run through ``python run.py -m`` (oracle
server over HTTP, litellm, MLflow) and in this process give the same verdicts, hits and
p-values."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import run_tabmem
from mlflow.tracking import MlflowClient

from tabmem.calibrate.cells import Job, ModelSpec, run_job
from tabmem.calibrate.run import Size, compose_world
from tabmem.llm.oracle.partial import Recall

TESTS = ("row_completion", "feature_completion", "first_token")
DATASET = "iris"
SEED = 1
SHARE = 0.2  # oracle-partial's default recall.share (conf/model/oracle-partial.yaml)
EXPERIMENT = "calibrate-inprocess-agreement"


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict]:
    """The sample's cells from the real grid, by (model, test), read back from MLflow."""
    outputs: Path = tmp_path_factory.mktemp("outputs")
    done = run_tabmem(
        outputs,
        "-m",
        "model=oracle-copula,oracle-partial",
        f"dataset={DATASET}",
        f"test={','.join(TESTS)}",
        f"seed={SEED}",
        f"experiment={EXPERIMENT}",
        "tracking.traces=false",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    cells = {}
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        if tags.get("scope") == "dataset" or "test" not in tags:
            continue
        cells[(tags["model"], tags["test"])] = {
            "verdict": tags["verdict"],
            "n_hits": int(metrics["n_hits"]),
            "n_queries": int(metrics["n_queries"]),
            "p_value": metrics.get("p_value"),
        }
    return cells


@pytest.fixture(scope="module")
def in_process() -> dict[tuple[str, str], dict]:
    """The same cells run in this process, by (model, test)."""
    world = compose_world(Size(datasets=(DATASET,), settings=("default",), tests=TESTS))
    models = (
        ModelSpec("oracle-copula"),
        ModelSpec("oracle-partial", Recall(SHARE, SEED, "random", "learner")),
    )
    rows = run_job(world, Job(DATASET, "original", SEED, "default", models, TESTS))
    return {(r["model"], r["test"]): r for r in rows}


def test_the_sample_ran_every_cell_both_ways(grid, in_process) -> None:
    expected = {(m, t) for m in ("oracle-copula", "oracle-partial") for t in TESTS}
    assert set(grid) == expected
    assert set(in_process) == expected


def test_verdicts_hits_and_p_values_agree(grid, in_process) -> None:
    for key, real in grid.items():
        mine = in_process[key]
        assert mine["verdict"] == real["verdict"], key
        assert (mine["n_hits"], mine["n_queries"]) == (real["n_hits"], real["n_queries"]), key
        assert mine["p_value"] == real["p_value"], key


def test_the_sample_holds_more_than_one_verdict(grid) -> None:
    """A sample where every cell says the same would agree by luck: the partial memorizer
    finds rows the copula learner cannot."""
    assert len({cell["verdict"] for cell in grid.values()}) > 1
