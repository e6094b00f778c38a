"""The harness as tests drive it: its command line in a subprocess from the repository root,
and a test's settings as its YAML composes them."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
}


def run_python(*args: str, timeout: int = 900, root: Path = ROOT) -> subprocess.CompletedProcess:
    """``python <args>`` (a script or ``-m module``) in the repository at ``root`` (this one,
    or a copy) with its ``src`` first on the path, offline, its output captured as text."""
    env = {**ENV, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout
    )


def run_tabmem(
    outputs: Path, *overrides: str, timeout: int = 900, root: Path = ROOT
) -> subprocess.CompletedProcess:
    """``python run.py <overrides>`` into ``outputs``, without progress bars or query colours."""
    settings = (f"outputs_dir={outputs}", "progress=false", "show_queries=false")
    return run_python("run.py", *overrides, *settings, timeout=timeout, root=root)


@cache
def _composed(test: str) -> dict[str, Any]:
    from tabmem.api import compose_config

    return OmegaConf.to_container(compose_config([f"test={test}"]).test, resolve=True)


def settings_of(test: str, **changes: Any) -> dict[str, Any]:
    """Test ``test``'s config as ``conf/test/<test>.yaml`` composes it, with ``changes``; a
    change that is a mapping updates that section (``sampler={"n_samples": 5}``)."""
    config = _composed(test)
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}
    for key, value in changes.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = {**merged[key], **value} if both else value
    return merged
