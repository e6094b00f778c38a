"""hydra/launcher=ray for real: with no address the sweep starts a local Ray, which runs two
cells (slow). tests/slow/test_ray_cluster.py joins a Ray that was started beforehand."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import ENV, run_tabmem
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow


def test_ray_launcher_runs_cells_on_a_local_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(ENV, "RAY_AUTH_MODE", "disabled")
    result = run_tabmem(
        tmp_path,
        "-m",
        "hydra/launcher=ray",
        "hydra.launcher.ray.init.num_cpus=2",
        "model=oracle-memorizer,oracle-null",
        "dataset=iris",
        "test=header",
        "experiment=ray-test",
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
