"""The harness as tests drive it: its command line in a subprocess from the repository root,
a test's settings as its YAML composes them, and new MLflow stores seeded from one template."""

from __future__ import annotations

import atexit
import io
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
# A small grid's cells one after another in the sweep's own process, where the launcher is not
# what a test is about: joblib's two workers each import the harness again (a 4-cell oracle grid:
# 11 s of CPU with this launcher, 32 s with joblib's). Sweeps about the launcher keep joblib.
ONE_PROCESS = "hydra/launcher=basic"
ENV = {
    **{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
}


def run_python(
    *args: str, timeout: int = 900, root: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python <args>`` (a script or ``-m module``) in the repository at ``root`` (this one,
    or a copy) with its ``src`` first on the path, offline, ``env`` added to the environment,
    its output captured as text."""
    env = {**ENV, "PYTHONPATH": str(root / "src"), **(env or {})}
    return subprocess.run(
        [sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout
    )


@cache
def store_template() -> Path:
    """An empty MLflow SQLite store with all of MLflow's tables, made once per process: its
    migrations take seconds, a copy of the file milliseconds."""
    from mlflow.store.db.utils import _initialize_tables, create_sqlalchemy_engine_with_retry

    folder = Path(tempfile.mkdtemp(prefix="tabmem-store-template-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "mlflow.db"
    engine = create_sqlalchemy_engine_with_retry(f"sqlite:///{path}")
    _initialize_tables(engine)
    engine.dispose()
    return path


def seed_store(db: Path) -> None:
    """Put the template's tables where a new SQLite store is about to be made (nothing where one
    is): MLflow opens it as it would a store it had just migrated, and adds the default
    experiment as it does in a new store."""
    if db.exists():
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{db.name}.", suffix=".seed", dir=db.parent)
    os.close(handle)
    partial = Path(name)
    shutil.copyfile(store_template(), partial)
    try:
        os.link(partial, db)  # never over a store that appeared meanwhile
    except FileExistsError:
        pass
    finally:
        partial.unlink()


def run_tabmem(
    outputs: Path, *overrides: str, timeout: int = 900, root: Path = ROOT
) -> subprocess.CompletedProcess:
    """``python run.py <overrides>`` into ``outputs``, without progress bars or query colours;
    its store, where it is ``outputs/mlflow.db``, seeded from the template."""
    seed_outputs_store(outputs, overrides)
    return run_python("run.py", *overrides, *quiet_into(outputs), timeout=timeout, root=root)


def seed_outputs_store(outputs: Path, overrides: tuple[str, ...]) -> None:
    """Seed ``outputs/mlflow.db`` unless ``overrides`` send the runs to another store."""
    if not any(o.lstrip("+").startswith("tracking.uri=") for o in overrides):
        seed_store(outputs / "mlflow.db")


def quiet_into(outputs: Path) -> tuple[str, ...]:
    """The overrides of a run into ``outputs`` without progress bars or query colours."""
    return (f"outputs_dir={outputs}", "progress=false", "show_queries=false")


def call_here(command: Callable[[list[str]], int], *arguments: str) -> subprocess.CompletedProcess:
    """One of tabmem's commands (``tabmem.main.run``, ``tabmem.cli.tables``,
    ``tabmem.rescore.cli.main``: a function of its arguments that returns the exit status) in
    this process, ended as the process running it would end: its status, what it printed. No
    interpreter starts and imports the harness again (seconds of CPU a call), so commands whose
    subject is not the process run here. The logging handlers it sets up (Hydra's) are undone
    afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = command(list(arguments))
    except SystemExit as exit_:  # argparse's --help and usage errors
        status = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    finally:
        for handler in set(root.handlers) - set(handlers):
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
    return subprocess.CompletedProcess(arguments, status, out.getvalue(), err.getvalue())


def run_here(outputs: Path, *overrides: str) -> subprocess.CompletedProcess:
    """What ``run_tabmem(outputs, *overrides)`` does, through Hydra's own command line in this
    process (``call_here``), for grids whose subject is not the process; they take
    ``ONE_PROCESS``, as joblib's workers would each import everything again."""
    from tabmem.main import run

    seed_outputs_store(outputs, overrides)
    return call_here(run, *overrides, *quiet_into(outputs))


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


def assert_memorizer_and_null_cells(outputs: Path, experiment: str, datasets: tuple[str, ...]):
    """The launcher tests' grid read back from MLflow: one FINISHED run per model × dataset,
    ``evidence`` for the memorizer and ``no_evidence`` for the null model."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    cells = {(r.data.tags["model"], r.data.tags["dataset"]): r for r in runs}
    models = ("oracle-memorizer", "oracle-null")
    assert len(runs) == len(models) * len(datasets)
    assert set(cells) == {(m, d) for m in models for d in datasets}
    assert all(r.info.status == "FINISHED" for r in runs)
    for (model, _), run in cells.items():
        expected = "evidence" if model == "oracle-memorizer" else "no_evidence"
        assert run.data.tags["verdict"] == expected, (model, run.data.tags)
