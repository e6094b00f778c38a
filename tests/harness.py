"""The harness's command line as a user runs it, in a subprocess from the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "PYTHONPATH": str(ROOT / "src"),
}


def run_python(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``python <args>`` (a script or ``-m module``), offline, its output captured as text."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout
    )


def run_tabmem(outputs: Path, *overrides: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``python run.py <overrides>`` into ``outputs``, without progress bars or query colours."""
    settings = (f"outputs_dir={outputs}", "progress=false", "show_queries=false")
    return run_python("run.py", *overrides, *settings, timeout=timeout)
