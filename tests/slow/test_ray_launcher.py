"""hydra/launcher=ray for real: a local Ray instance runs two cells (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_ray_launcher_runs_cells_on_a_local_ray(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher.ray_launcher")
    result = subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            "hydra/launcher=ray",
            "hydra.launcher.ray.init.num_cpus=2",
            "model=oracle-memorizer,oracle-null",
            "dataset=iris",
            "test=header",
            f"outputs_dir={tmp_path}",
            "progress=false",
            "show_queries=false",
            "experiment=ray-test",
        ],
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "RAY_AUTH_MODE": "disabled"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Ray Launcher is launching 2 jobs" in result.stderr + result.stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ray-test")
    runs = {r.data.tags["model"]: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"oracle-memorizer", "oracle-null"}
    assert runs["oracle-memorizer"].data.tags["verdict"] == "evidence"
    assert runs["oracle-null"].data.tags["verdict"] == "no_evidence"
    assert all(r.info.status == "FINISHED" for r in runs.values())
