"""The harness phones nobody: importing it turns MLflow's network telemetry off."""

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

CHECK = """
import tabmem.tracking.store
from mlflow.telemetry import get_telemetry_client
print(get_telemetry_client())
"""


def test_importing_the_harness_leaves_mlflow_without_a_telemetry_client():
    # A bare environment: no CI or pytest variables, under which MLflow would stay quiet anyway.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PYTHONPATH": str(SRC)}
    result = subprocess.run(
        [sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "None"
