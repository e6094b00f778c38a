"""The lab's tests as a real Hydra sweep: every checkpoint × dataset × test, one MLflow run each.

The sweep goes through ``run.py`` like any grid, so each cell is tracked, cached and skipped
on a re-run exactly as elsewhere; the lab's checkpoints are found through Hydra's search path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tabmem.errors import TabmemError
from tabmem.paths import project_root


def sweep_command(
    models: Sequence[str],
    datasets: Sequence[str],
    tests: Sequence[str],
    conf_root: Path,
    outputs_dir: Path,
    experiment: str,
    overrides: Sequence[str] = (),
    jobs: int = 1,
) -> list[str]:
    """The run.py multirun that evaluates the lab, ``jobs`` cells at once (each job holds its
    own copy of a checkpoint)."""
    return [
        sys.executable,
        str(project_root() / "run.py"),
        "-m",
        f"hydra.searchpath=[file://{conf_root.resolve()}]",
        f"model={','.join(models)}",
        f"dataset={','.join(datasets)}",
        f"test={','.join(tests)}",
        f"experiment={experiment}",
        f"outputs_dir={outputs_dir.resolve()}",
        f"hydra.launcher.n_jobs={jobs}",
        "progress=false",
        "show_queries=false",
        *overrides,
    ]


def run_sweep(command: Sequence[str], log_file: Path) -> None:
    """Run the sweep (output into ``log_file``); a failed sweep stops the lab with one sentence."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("w") as handle:
        done = subprocess.run(
            list(command), cwd=project_root(), env=env, stdout=handle, stderr=subprocess.STDOUT
        )
    if done.returncode != 0:
        raise TabmemError(
            f"The lab's evaluation sweep failed (exit {done.returncode}); see {log_file}."
        )
