"""The learning tests on the embedded model, for real (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_embedded_model_runs_both_learning_tests(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            "model=smollm2-135m",
            "dataset=iris",
            "transform=original,statistical",
            "test=fewshot_predict,statistical_learning",
            "++test.n_test_rows=6",
            "++test.shot_sets=1",
            "++test.n_problems=2",
            "++test.dimensions=[2]",
            "++test.shots=[5]",
            "model.n_threads=1",
            f"outputs_dir={tmp_path}",
            "progress=false",
            "show_queries=false",
            "experiment=learning-embedded",
        ],
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "4 finished, 0 skipped, 0 failed" in result.stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("learning-embedded")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 4
    for run in runs:
        m = run.data.metrics
        assert run.data.tags["model"] == "smollm2-135m"
        assert m["n_failed_queries"] == 0 and m["model_calls"] > 0
        assert m["accuracy_ci_low"] <= m["accuracy"] <= m["accuracy_ci_high"]
        assert m["n_unparseable"] <= m["n_queries"]
    predict = [r for r in runs if r.data.tags["test"] == "fewshot_predict"]
    assert {r.data.metrics["n_queries"] for r in predict} == {6}
