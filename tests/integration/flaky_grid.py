"""Helpers for grids against a local server: model configs written at test time, a run.py
sweep as a subprocess or in this process, and its MLflow runs read back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from harness import run_here, seed_store
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
FAST_RETRY = {"max_retries": 3, "base_delay": 0.05, "max_delay": 0.2}


def write_model_config(conf: Path, name: str, base_url: str, **overrides: Any) -> Path:
    """``conf/model/<name>.yaml``: a litellm model answered by the oracle server behind
    ``base_url`` (``oracle-memorizer`` unless ``served`` says otherwise)."""
    served = overrides.pop("served", "oracle-memorizer")
    config = {
        "name": name,
        "backend": "litellm",
        "litellm_model": f"openai/{served}",
        "completion_model": f"text-completion-openai/{served}",
        "api_base": base_url,
        "prompt_form": "chat",
        "context_window": 100000,
        "max_concurrency": 4,
        "timeout": 3.0,  # a hang (8 s) times out; a busy machine's slow answer does not
        "retry": dict(FAST_RETRY),
        **overrides,
    }
    path = conf / "model" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def sweep_command(outputs: Path, conf: Path | None, experiment: str, *args: str) -> list[str]:
    """The ``python run.py`` command line of a quiet sweep into ``outputs``."""
    command = [sys.executable, "run.py", *args, f"outputs_dir={outputs}"]
    command += ["progress=false", "show_queries=false", f"experiment={experiment}"]
    if conf is not None:
        command.append(f"hydra.searchpath=[file://{conf}]")
    return command


def sweep_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra}


def run_sweep(
    outputs: Path, conf: Path | None, experiment: str, *args: str, **env: str
) -> subprocess.CompletedProcess:
    """Run a sweep to its end and return its output (its store, where it is
    ``outputs/mlflow.db``, seeded from the template)."""
    if "MLFLOW_TRACKING_URI" not in env and not any("tracking.uri=" in a for a in args):
        seed_store(outputs / "mlflow.db")
    return subprocess.run(
        sweep_command(outputs, conf, experiment, *args),
        cwd=ROOT,
        env=sweep_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def sweep_here(
    outputs: Path, conf: Path | None, experiment: str, *args: str
) -> subprocess.CompletedProcess:
    """``run_sweep`` in this process (``harness.run_here``), for a sweep whose subject is not
    the process."""
    searchpath = [f"hydra.searchpath=[file://{conf}]"] if conf is not None else []
    return run_here(outputs, *args, f"experiment={experiment}", *searchpath)


def mlflow_runs(outputs: Path, experiment: str) -> tuple[list[Any], MlflowClient]:
    """Every run of ``experiment`` in the sweep's store, and a client to read artifacts."""
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return [], client
    return client.search_runs([found.experiment_id], max_results=1000), client
