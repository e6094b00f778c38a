"""Addresses in the MLflow UI, built here for every place that prints or links one: ``make ui``
before it starts, the summary at the end of a run or grid, and the report page's links.

MLflow 3.17's UI picks an experiment's view with the sidebar switch "GenAI / Model training"
(remembered by the browser, GenAI at first); ``workflowType=machine_learning`` in the address
opens the experiment on its runs, where each run's name starts with its verdict.

    python -m tabmem.tracking.ui_links outputs/mlflow.db http://127.0.0.1:5000
"""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from pathlib import Path

from tabmem.tracking.store import sqlite_path

RUNS_VIEW = "workflowType=machine_learning"
DEFAULT_UI_URL = "http://127.0.0.1:5000"
"""Where ``mlflow ui`` (and ``make ui``) serves a local store's UI."""


def ui_url_for(tracking_uri: str) -> str:
    """The UI of a store: a tracking server's own address, else where ``mlflow ui`` serves a
    local store's."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/")
    return DEFAULT_UI_URL


def experiment_url(base_url: str, experiment_id: str) -> str:
    """The experiment's page in the UI, on its list of runs."""
    return f"{base_url.rstrip('/')}/#/experiments/{experiment_id}?{RUNS_VIEW}"


def run_url(base_url: str, experiment_id: str, run_id: str) -> str:
    """A run's page in the UI."""
    return f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def experiment_id(tracking_uri: str, name: str) -> str | None:
    """The id of experiment ``name`` in a store, None where the store or the experiment does
    not exist (or the server does not answer). A SQLite store is read read-only, without
    MLflow."""
    path = sqlite_path(tracking_uri)
    if path is not None:
        if not path.is_file():
            return None
        try:
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                row = db.execute(
                    "SELECT experiment_id FROM experiments WHERE name = ?", (name,)
                ).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else str(row[0])
    try:
        from mlflow.tracking import MlflowClient

        found = MlflowClient(tracking_uri=tracking_uri).get_experiment_by_name(name)
    except Exception:  # an unreachable server: the summary still says where the runs went
        return None
    return None if found is None else str(found.experiment_id)


def browse_hint(tracking_uri: str, experiment: str | None = None) -> str:
    """How to look at an experiment's runs: a local store needs MLflow's own UI started first
    (a command that works from any folder, with or without this repository's Makefile); then
    the address of the runs list, where the experiment is known."""
    base = ui_url_for(tracking_uri)
    found = experiment_id(tracking_uri, experiment) if experiment else None
    address = experiment_url(base, found) if found else base
    if tracking_uri.startswith(("http://", "https://")):
        return f"open {address}"
    return f"start the UI with `mlflow ui --backend-store-uri {tracking_uri}`, then open {address}"


def experiment_links(database: Path, base_url: str) -> list[str]:
    """``name  url`` for each experiment of the store that has runs, the newest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{database.resolve()}")
    lines = []
    for experiment in client.search_experiments(order_by=["last_update_time DESC"]):
        if client.search_runs([experiment.experiment_id], max_results=1):
            lines.append(
                f"  {experiment.name:<16} {experiment_url(base_url, experiment.experiment_id)}"
            )
    return lines


def main(argv: list[str]) -> None:
    database, base_url = Path(argv[0]), argv[1]
    if not database.exists():
        print(f"No MLflow store at {database} yet: run a grid first (make demo).")
        return
    lines = experiment_links(database, base_url)
    print("Experiments (each opens on its runs):" if lines else "No runs in the store yet.")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
