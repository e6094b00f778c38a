"""A small real sweep shared by the tracing and browser tests: two reference models on iris."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import ONE_PROCESS, seed_store

ROOT = Path(__file__).resolve().parents[2]
UI_EXPERIMENT = "ui-test"


@pytest.fixture(scope="session")
def ui_sweep(tmp_path_factory) -> Path:
    """The outputs folder of ``model=oracle-memorizer,oracle-null dataset=iris test=header``."""
    outputs = tmp_path_factory.mktemp("ui-outputs")
    seed_store(outputs / "mlflow.db")
    done = subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            "model=oracle-memorizer,oracle-null",
            "dataset=iris",
            "test=header",
            ONE_PROCESS,
            f"outputs_dir={outputs}",
            f"experiment={UI_EXPERIMENT}",
            "progress=false",
            "show_queries=false",
        ],
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return outputs
