"""The transformers backend on the real SmolLM2 weights (GGUF, dequantized on CPU) (slow)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harness import run_tabmem
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
pytest.importorskip("transformers")


def run_cells(outputs: Path, *args: str) -> subprocess.CompletedProcess:
    return run_tabmem(outputs, *args, "experiment=hf-test", timeout=1500)


def runs_by_test(outputs: Path) -> dict:
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("hf-test")
    runs = client.search_runs([experiment.experiment_id])
    return {r.data.tags["test"]: r for r in runs if r.data.tags.get("scope") != "dataset"}


def test_smollm2_in_transformers_scores_rows_and_generates(tmp_path):
    result = run_cells(
        tmp_path,
        "-m",
        "model=smollm2-135m-hf",
        "dataset=iris",
        "test=min_k_prob,header",
        "hydra.launcher.n_jobs=1",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 finished, 0 skipped, 0 failed" in result.stdout
    runs = runs_by_test(tmp_path)
    min_k = runs["min_k_prob"].data
    assert 0.0 <= min_k.metrics["auc"] <= 1.0
    assert 0.0 < min_k.metrics["p_value"] <= 1.0
    # every row of iris (150), less those whose donor brought the very values they have
    assert min_k.metrics["pairs_scored"] == 150 - min_k.metrics["pairs_dropped"]
    assert min_k.metrics["n_failed_queries"] == 0
    assert min_k.tags["verdict"] in {"evidence", "no_evidence", "ambiguous"}
    header = runs["header"].data
    assert header.metrics["n_queries"] == 4
    assert header.metrics["n_failed_queries"] == 0
    assert header.params["model.backend"] == "transformers"


def test_base_model_in_transformers_scores_the_row_order(tmp_path):
    result = run_cells(
        tmp_path,
        "model=gemma3-270m-hf",
        "dataset=openml-diabetes",  # its first rows show no order in the data (icu's do)
        "test=row_order",
        "test.n_rows=12",
        "test.n_permutations=19",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run = runs_by_test(tmp_path)["row_order"]
    assert run.data.tags["verdict"] in {"evidence", "no_evidence", "ambiguous"}
    assert run.data.metrics["n_permutations"] == 19
    assert run.data.metrics["n_queries"] == 20
    assert run.data.metrics["loglik_file_order"] < 0
