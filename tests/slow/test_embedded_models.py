"""The embedded models, for real: the demo grid and the plain-completion path (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run_tabmem(outputs: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "run.py", *args, f"outputs_dir={outputs}", "show_queries=false"],
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=1500,
    )


def finished_runs(outputs: Path, experiment: str) -> list:
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id], filter_string="attributes.status = 'FINISHED'")


def test_demo_grid_runs_the_embedded_model_over_four_datasets(tmp_path):
    result = run_tabmem(tmp_path, "+grid=demo", "progress=false")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "4 finished, 0 skipped, 0 failed" in result.stdout
    runs = finished_runs(tmp_path, "demo")
    assert {r.data.tags["dataset"] for r in runs} == {"iris", "titanic", "adult", "synthetic-novel"}
    for run in runs:
        assert run.data.tags["model"] == "smollm2-135m"
        assert run.data.tags["verdict"] in {"evidence", "no_evidence", "ambiguous"}
        assert run.data.metrics["n_queries"] == 4
        assert run.data.metrics["n_failed_queries"] == 0


def test_base_model_runs_in_plain_completion_form(tmp_path):
    result = run_tabmem(tmp_path, "model=gemma3-270m", "dataset=wine", "test=header")
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = finished_runs(tmp_path, "tabmem")
    assert run.data.params["model.prompt_form"] == "completion"
    assert run.data.metrics["n_queries"] == 4
    assert run.data.metrics["model_calls"] == 4
