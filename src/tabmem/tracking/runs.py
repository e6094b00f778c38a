"""Read tracked runs back from MLflow into one DataFrame: the only input of the paper tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tabmem.tracking.store import sqlite_path

CELL_TAGS = ("model", "dataset", "test", "transform", "verdict", "reason", "suite", "error")


def load_runs(
    tracking_uri: str,
    experiments: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    distinct: Sequence[str] = (),
) -> pd.DataFrame:
    """Every run of the named experiments (all if None), one row each.

    Columns: run_id, experiment, status, start_time, the cell tags, artifact_uri,
    ``info.<key>``, ``metric.<name>`` and ``param.<name>``. Only the newest FINISHED run
    of each cell is kept, so a re-run replaces an older one and nothing is counted twice;
    ``distinct`` names further columns that tell cells apart (``param.test.temperature``).
    """
    return latest_finished(all_runs(tracking_uri, experiments, models), distinct)


def all_runs(
    tracking_uri: str,
    experiments: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every active run of the named experiments (all if None), whatever its status, in the
    columns ``load_runs`` gives."""
    path = sqlite_path(tracking_uri)
    if path is not None:
        frame = sqlite_frame(path, experiments)
    else:
        frame = client_frame(tracking_uri, experiments)
    if models:
        frame = frame[frame["model"].isin(models)]
    return frame


BASE_COLUMNS = ("run_id", "experiment", "status", "start_time", *CELL_TAGS)


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """The base columns first (present even when no run has them), then the rest."""
    base = list(BASE_COLUMNS)
    return frame.reindex(columns=[*base, *(c for c in frame.columns if c not in base)])


def client_frame(tracking_uri: str, experiments: Sequence[str] | None) -> pd.DataFrame:
    """Every active run of the experiments through the MLflow client, one row each."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.search_experiments()
    names = {e.experiment_id: e.name for e in found if not experiments or e.name in experiments}
    rows = []
    if names:
        for run in _all_runs(client, list(names)):
            row = {
                "run_id": run.info.run_id,
                "experiment": names[run.info.experiment_id],
                "status": run.info.status,
                "start_time": pd.to_datetime(run.info.start_time, unit="ms"),
                "artifact_uri": run.info.artifact_uri,
            }
            row.update({tag: run.data.tags.get(tag, "") for tag in CELL_TAGS})
            row.update({k: v for k, v in run.data.tags.items() if k.startswith("info.")})
            row.update({f"metric.{k}": v for k, v in run.data.metrics.items()})
            row.update({f"param.{k}": v for k, v in run.data.params.items()})
            rows.append(row)
    return _ordered(pd.DataFrame(rows))


def sqlite_frame(path: str | Path, experiments: Sequence[str] | None) -> pd.DataFrame:
    """The same frame as ``client_frame``, read with SQL from a SQLite store.

    The client builds an object per tag, parameter and metric (seconds for a few thousand
    runs); four queries and three pivots take a fraction of that. Read-only: the store is
    opened with ``mode=ro`` and never created.
    """
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        runs = pd.read_sql_query(
            "SELECT r.run_uuid AS run_id, e.name AS experiment, r.status, r.start_time, "
            "r.artifact_uri "
            "FROM runs r JOIN experiments e ON r.experiment_id = e.experiment_id "
            "WHERE r.lifecycle_stage = 'active' AND e.lifecycle_stage = 'active'",
            db,
        )
        if experiments:
            runs = runs[runs["experiment"].isin(list(experiments))]
        ids = set(runs["run_id"])
        parts = [_pivot(db, "tags", "", ids), _pivot(db, "params", "param.", ids)]
        parts.append(_pivot(db, "latest_metrics", "metric.", ids))
    runs["start_time"] = pd.to_datetime(runs["start_time"], unit="ms")
    frame = runs.set_index("run_id").join(parts, how="left").reset_index()
    tags = [c for c in parts[0].columns if c in CELL_TAGS or c.startswith("info.")]
    frame = frame.drop(columns=[c for c in parts[0].columns if c not in tags])
    for tag in CELL_TAGS:
        frame[tag] = frame[tag].fillna("") if tag in frame else ""
    return _ordered(frame)


def _pivot(db: object, table: str, prefix: str, ids: set[str]) -> pd.DataFrame:
    """One table of key/value rows as one column per key (``prefix`` + key), by run id."""
    value = "CASE WHEN is_nan THEN NULL ELSE value END" if table == "latest_metrics" else "value"
    rows = pd.read_sql_query(f'SELECT run_uuid, "key", {value} AS value FROM {table}', db)
    rows = rows[rows["run_uuid"].isin(ids)]
    wide = rows.pivot(index="run_uuid", columns="key", values="value")
    wide.columns = [f"{prefix}{key}" for key in wide.columns]
    return wide.rename_axis("run_id")


def _all_runs(client: object, experiment_ids: list[str]) -> list:
    runs, token = [], None
    while True:
        page = client.search_runs(experiment_ids, max_results=5000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def latest_finished(frame: pd.DataFrame, distinct: Sequence[str] = ()) -> pd.DataFrame:
    """The newest FINISHED run per (model, dataset, test, transform) and ``distinct`` columns;
    a run that is no cell (no test: a grid's page, ``report.page.log_page``) is left out."""
    if frame.empty:
        return frame
    done = frame[(frame["status"] == "FINISHED") & (frame["test"] != "")]
    done = done.sort_values("start_time")
    keys = ["model", "dataset", "test", "transform", *(c for c in distinct if c in frame)]
    return done.drop_duplicates(keys, keep="last").reset_index(drop=True)


def latest_failed(frame: pd.DataFrame, distinct: Sequence[str] = ()) -> pd.DataFrame:
    """The cells whose newest run FAILED (no run of the cell finished after it), one row
    each: what a grid left undone, with its error."""
    if frame.empty:
        return frame
    cells = frame[frame["status"].isin(["FINISHED", "FAILED"]) & (frame["test"] != "")]
    keys = ["model", "dataset", "test", "transform", *(c for c in distinct if c in frame)]
    newest = cells.sort_values("start_time").drop_duplicates(keys, keep="last")
    return newest[newest["status"] == "FAILED"].reset_index(drop=True)
