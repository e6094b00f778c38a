"""hydra/launcher=submitit_slurm for real: scripts/slurm_single_node.sh installs and starts a
one-node Slurm cluster on this machine, and a 4-cell grid runs on it as a job array (slow)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from harness import ROOT, assert_memorizer_and_null_cells, run_tabmem

SCRIPT = ROOT / "scripts" / "slurm_single_node.sh"
DATASETS = ("iris", "wine")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def partition() -> str:
    """The partition of a running Slurm cluster: the script's one-node cluster, which it
    installs and starts when needed (as root), or leaves alone when it is already up."""
    if os.geteuid() != 0 and shutil.which("sinfo") is None:
        pytest.skip("Slurm is not installed and only root may install it (apt-get)")
    setup = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=600)
    assert setup.returncode == 0, setup.stderr[-3000:]
    return setup.stdout.split()[-1]


def test_a_grid_runs_as_a_slurm_job_array(tmp_path: Path, partition: str) -> None:
    result = run_tabmem(
        tmp_path,
        "-m",
        "hydra/launcher=submitit_slurm",
        f"hydra.launcher.partition={partition}",
        "hydra.launcher.timeout_min=10",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.gpus_per_node=0",
        "hydra.launcher.mem_gb=1",
        "model=oracle-memorizer,oracle-null",
        f"dataset={','.join(DATASETS)}",
        "test=header",
        "experiment=slurm-test",
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # submitit writes a task's result from inside the Slurm job: four tasks of one array ran.
    results = sorted(tmp_path.glob("multirun/*/*/.submitit/*/*_result.pkl"))
    assert len(results) == 4, results
    assert len({p.name.split("_")[0] for p in results}) == 1, results

    assert_memorizer_and_null_cells(tmp_path, "slurm-test", DATASETS)
