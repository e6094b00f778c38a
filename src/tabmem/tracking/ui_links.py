"""The address of each experiment in the MLflow UI, as ``make ui`` prints it before starting.

MLflow 3.17's UI picks an experiment's view with the sidebar switch "GenAI / Model training"
(remembered by the browser, GenAI at first); ``workflowType=machine_learning`` in the address
opens the experiment on its runs, where each run's name starts with its verdict.

    python -m tabmem.tracking.ui_links outputs/mlflow.db http://127.0.0.1:5000
"""

from __future__ import annotations

import sys
from pathlib import Path

RUNS_VIEW = "workflowType=machine_learning"


def experiment_url(base_url: str, experiment_id: str) -> str:
    """The experiment's page in the UI, on its list of runs."""
    return f"{base_url.rstrip('/')}/#/experiments/{experiment_id}?{RUNS_VIEW}"


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
