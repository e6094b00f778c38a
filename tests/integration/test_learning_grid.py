"""Real Hydra sweeps of the learning tests: baselines and the memorizer on two transforms, read
back from a real MLflow store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from harness import ONE_PROCESS, run_here
from mlflow.tracking import MlflowClient

EXPERIMENT = "learning-test"


def run_cells(outputs: Path, *args: str) -> subprocess.CompletedProcess:
    return run_here(outputs, *args, f"experiment={EXPERIMENT}")


def runs(outputs: Path) -> tuple[dict[tuple[str, str, str], object], MlflowClient]:
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    found = client.search_runs([experiment.experiment_id], max_results=1000)
    return {
        (r.data.tags["model"], r.data.tags["test"], r.data.tags["transform"]): r for r in found
    }, client


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    predict = run_cells(
        outputs,
        "-m",
        "model=logistic-regression,oracle-memorizer",
        "dataset=iris",
        "transform=original,perturbed",
        "test=fewshot_predict",
        "test.n_test_rows=60",
        ONE_PROCESS,
    )
    assert predict.returncode == 0, predict.stderr[-3000:]
    # apart: a sweep over both tests would give the header test settings it does not have,
    # and the check before the grid refuses those
    header = run_cells(outputs, "model=logistic-regression", "dataset=iris", "test=header")
    assert header.returncode == 0, header.stderr[-3000:]
    learning = run_cells(
        outputs,
        "model=logistic-regression",
        "dataset=iris",
        "test=statistical_learning",
        "test.n_problems=6",
        "test.dimensions=[1,4]",
        "test.shots=[5,10]",
    )
    assert learning.returncode == 0, learning.stderr[-3000:]
    return outputs, predict


def test_every_fewshot_cell_is_a_finished_run_with_accuracy_and_interval(grid):
    outputs, predict = grid
    found, _ = runs(outputs)
    cells = {k: r for k, r in found.items() if k[1] == "fewshot_predict"}
    assert len(cells) == 4
    assert "4 finished, 0 skipped, 0 failed" in predict.stdout
    for (model, _, transform), run in cells.items():
        m = run.data.metrics
        assert run.info.status == "FINISHED", (model, transform)
        assert run.data.tags["dataset"] == "iris"
        assert m["n_queries"] == 60 and m["n_unparseable"] == 0
        assert m["accuracy_ci_low"] <= m["accuracy"] <= m["accuracy_ci_high"]
        assert 0.2 <= m["majority_baseline"] <= 0.45  # three balanced classes
        assert run.data.params["test.n_shots"] == "20"


def test_logistic_regression_is_accurate_on_both_versions(grid):
    found, _ = runs(grid[0])
    for transform in ("original", "perturbed"):
        lr = found[("logistic-regression", "fewshot_predict", transform)].data
        assert lr.metrics["accuracy"] >= 0.88 and lr.tags["verdict"] == "evidence"
        assert lr.metrics["model_calls"] == 0  # fitted, never prompted


def test_memorizer_loses_accuracy_when_the_data_is_perturbed(grid):
    outputs, _ = grid
    found, client = runs(outputs)
    original = found[("oracle-memorizer", "fewshot_predict", "original")]
    perturbed = found[("oracle-memorizer", "fewshot_predict", "perturbed")]
    assert original.data.metrics["accuracy"] == 1.0
    assert perturbed.data.metrics["accuracy"] <= 0.9
    path = client.download_artifacts(original.info.run_id, "queries.json", str(outputs / "dl"))
    table = json.loads(Path(path).read_text())
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    assert len(rows) == 60 and all(r["completion"] == r["expected"] for r in rows)
    assert rows[0]["prompt"].rstrip().endswith("THEN species =")
    assert "Iris" in rows[0]["prompt"].split("[user]")[0]  # the original names the dataset


def test_a_baseline_cannot_run_a_test_that_needs_a_language_model(grid):
    found, _ = runs(grid[0])
    header = found[("logistic-regression", "header", "original")].data
    assert header.tags["verdict"] in {"failed", "not_applicable"}
    said = header.tags.get("error", "") + header.tags.get("reason", "")
    assert "statistical baseline, not a language model" in said


def test_statistical_learning_logs_curves_for_three_learners(grid):
    outputs, _ = grid
    found, client = runs(outputs)
    run = found[("logistic-regression", "statistical_learning", "original")]
    assert run.info.status == "FINISHED"
    assert run.data.metrics["n_queries"] == 4 * 6  # (d, shots) = (1, 20), (4, 20), (8, 5), (8, 10)
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"curves.json", "statistical_learning.png", "queries.json"} <= names
    for name in ("accuracy", "lr_accuracy", "knn_accuracy"):
        assert 0.0 <= run.data.metrics[name] <= 1.0
