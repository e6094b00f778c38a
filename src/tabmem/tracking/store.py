"""The MLflow store: created once under a file lock, written under the same lock.

MLflow 3 refuses the plain-file store, and parallel jobs that create a fresh
SQLite store at once fail in its migrations, so every access that writes goes
through one inter-process lock beside the database. A SQLite store runs in WAL mode
with ``synchronous=NORMAL``: each trace is one transaction, and a commit then costs
no fsync of the whole database (docs/ui.md has the figures).

Opening the MLflow client costs seconds (importing MLflow and SQLAlchemy), so a store opens
it on first use: asking a SQLite store whether a cell already finished is one read-only
query with ``sqlite3``, and a grid whose cells all finished never imports MLflow. A process
about to run cells can hand its writes to a helper process that opens the client meanwhile
(``use_writer``, ``tabmem.tracking.writer``).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from tabmem.results import CellResult
from tabmem.tracking.traces import QueryLog, build_traces, write_traces

if TYPE_CHECKING:
    from mlflow.entities import DatasetInput
    from mlflow.tracking import MlflowClient

    from tabmem.tracking.inputs import ShownData
    from tabmem.tracking.writer import StoreKey, StoreWriter

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

# MLflow 3's UI opens an experiment on the view its kind names; runs, not the GenAI overview.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
NOTE_TAG = "mlflow.note.content"
EXPERIMENT_NOTE = (
    "One run per grid cell (model × dataset × test × transform): the run name starts with the "
    "verdict, the description says why, and the run's traces hold every query with its prompt, "
    "completion, expected text (expectation) and score (feedback)."
)


def default_tracking_uri(outputs_dir: Path) -> str:
    return f"sqlite:///{(outputs_dir / 'mlflow.db').resolve()}"


def tracking_uri(configured: str | None, outputs_dir: Path) -> str:
    """The store to write to: ``tracking.uri`` if set, else MLflow's own ``MLFLOW_TRACKING_URI``
    (a team's shared server), else the SQLite file in the outputs folder."""
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(outputs_dir)


def is_remote(uri: str) -> bool:
    """A tracking server, which keeps artifacts where it is configured to, not in our folder."""
    return uri.startswith(("http://", "https://", "databricks"))


@dataclass
class TrackingStore:
    """An MLflow experiment in a given store, ready for one run per cell; the client and the
    experiment open on first use (``client``, ``experiment_id``)."""

    uri: str
    artifact_root: Path | None  # None: the tracking server chooses (its --artifacts-destination)
    experiment: str
    lock_path: Path
    _client: MlflowClient | None = field(default=None, init=False, repr=False, compare=False)
    _experiment_id: str = field(default="", init=False, repr=False, compare=False)
    _writer: StoreWriter | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def at(
        cls,
        outputs: Path,
        experiment: str,
        uri: str | None = None,
        artifact_root: str | Path | None = None,
    ) -> TrackingStore:
        """The store a grid writing into ``outputs`` uses (``uri`` and ``artifact_root`` as the
        ``tracking`` config gives them; unset, the defaults of ``tracking_uri``)."""
        resolved = tracking_uri(uri, outputs)
        root = Path(str(artifact_root)) if artifact_root else None
        if root is None and not is_remote(resolved):
            root = outputs / "mlartifacts"
        return cls(resolved, root, experiment, outputs / "mlflow.lock")

    def __post_init__(self) -> None:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        if self.artifact_root is not None:
            self.artifact_root.mkdir(parents=True, exist_ok=True)

    @property
    def key(self) -> StoreKey:
        """What a helper process needs to open this store."""
        root = str(self.artifact_root) if self.artifact_root is not None else None
        return (self.uri, root, self.experiment, str(self.lock_path))

    def use_writer(self) -> None:
        """Write runs through this process's MLflow helper, which starts opening the store now
        (``tabmem.tracking.writer``): for a process that has not imported MLflow and is about
        to load a cell's data and model meanwhile. A no-op where MLflow is imported already."""
        from tabmem.tracking.writer import writer_for

        if self._client is None:
            self._writer = writer_for(self.key)

    @property
    def client(self) -> MlflowClient:
        """The MLflow client, the experiment created (or found) under the lock on first use."""
        if self._client is None:
            self._open()
        assert self._client is not None
        return self._client

    def open_client(self) -> None:
        """Import MLflow and open the client and the experiment now, not at the first use."""
        if self._client is None:
            self._open()

    @property
    def experiment_id(self) -> str:
        if self._client is None:
            self._open()
        return self._experiment_id

    def _open(self) -> None:
        from mlflow.tracking import MlflowClient

        for logger_name in ("mlflow", "alembic"):
            logging.getLogger(logger_name).setLevel(logging.WARNING)
        with self._file_lock():
            _create_sqlite_whole(self.uri)
            client = MlflowClient(tracking_uri=self.uri)
            found = client.get_experiment_by_name(self.experiment)
            if found is None:
                self._experiment_id = client.create_experiment(
                    self.experiment,
                    artifact_location=(
                        self.artifact_root.resolve().as_uri() if self.artifact_root else None
                    ),
                    tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND, NOTE_TAG: EXPERIMENT_NOTE},
                )
            else:
                self._experiment_id = found.experiment_id
                if EXPERIMENT_KIND_TAG not in found.tags:
                    client.set_experiment_tag(
                        self._experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND
                    )
            _use_wal(self.uri)
            self._client = client

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The store's inter-process lock, the client open (it opens under the same lock,
        which a process cannot take twice)."""
        if self._client is None:
            self._open()
        with self._file_lock():
            yield

    def _file_lock(self) -> FileLock:
        return FileLock(str(self.lock_path), timeout=600)

    def finished_run(self, config_hash: str) -> str | None:
        """The id of a finished run of this exact cell configuration, if there is one."""
        found = self.finished(config_hash)
        return found.run_id if found else None

    def finished(self, config_hash: str) -> CellResult | None:
        """The newest finished run of this exact cell configuration, if there is one: read
        from a SQLite file with ``sqlite3`` while the client is not open (no store file: none),
        else searched through the client."""
        path = sqlite_path(self.uri)
        if self._client is None and path is not None:
            try:
                return finished_in_sqlite(path, self.experiment, config_hash)
            except sqlite3.Error:  # a store being created or migrated: ask MLflow
                pass
        with self.locked():
            runs = self.client.search_runs(
                [self.experiment_id],
                filter_string=(
                    f"tags.config_hash = '{config_hash}' and attributes.status = 'FINISHED'"
                ),
                max_results=1,
                order_by=["attributes.start_time DESC"],
            )
        if not runs:
            return None
        return _read(runs[0].info.run_id, runs[0].data.tags, runs[0].data.metrics, self.uri)

    def log_cell(
        self,
        run_name: str,
        tags: Mapping[str, str],
        params: Mapping[str, Any],
        metrics: Mapping[str, float],
        tables: Mapping[str, Any],
        texts: Mapping[str, str],
        failed: bool,
        figures: Mapping[str, Any] | None = None,
        *,
        start_ms: int | None = None,
        description: str = "",
        queries: QueryLog | None = None,
        dataset: DatasetInput | ShownData | None = None,
    ) -> str:
        """Write one cell as one run (FINISHED or FAILED) and return its id.

        The run starts at ``start_ms`` (the cell's real start) and ends when it is written;
        ``description`` becomes the run's description; ``queries`` become its traces;
        ``dataset`` its dataset input (``tracking.inputs``). With a helper (``use_writer``)
        and no client open here, the helper writes it.
        """
        if self._writer is not None and self._client is None:
            from tabmem.tracking.writer import WriterGone

            arguments = {
                "run_name": run_name,
                **{"tags": tags, "params": params, "metrics": metrics, "tables": tables},
                **{"texts": texts, "failed": failed, "figures": figures, "start_ms": start_ms},
                **{"description": description, "queries": queries, "dataset": dataset},
            }
            try:
                return self._writer.log_cell(self.key, arguments)
            except WriterGone as gone:  # written here instead
                logging.getLogger(__name__).warning("%s; the run is written here", gone)
                self._writer = None
        from mlflow.entities import Metric, Param, RunTag

        from tabmem.tracking.inputs import ShownData

        if isinstance(dataset, ShownData):
            dataset = dataset.to_input()

        tags = {**tags, **({NOTE_TAG: description} if description else {})}
        with self.locked():
            run = self.client.create_run(
                self.experiment_id, start_time=start_ms, run_name=run_name, tags=dict(tags)
            )
            run_id = run.info.run_id
            param_list = [Param(k, _param_value(v)) for k, v in params.items()]
            metric_list = [Metric(k, float(v), 0, 0) for k, v in metrics.items() if _finite(v)]
            for start in range(0, max(len(param_list), 1), 100):
                self.client.log_batch(run_id, params=param_list[start : start + 100])
            for start in range(0, max(len(metric_list), 1), 500):
                self.client.log_batch(run_id, metrics=metric_list[start : start + 500])
            self.client.log_batch(run_id, tags=[RunTag("mlflow.runName", run_name)])
            if dataset is not None:
                self.client.log_inputs(run_id, datasets=[dataset])
            for artifact_file, frame in tables.items():
                self.client.log_table(run_id, data=frame, artifact_file=artifact_file)
            for artifact_file, text in texts.items():
                self.client.log_text(run_id, text, artifact_file)
            for artifact_file, figure in (figures or {}).items():
                self.client.log_figure(run_id, figure, artifact_file)
            if queries is not None and queries.records:
                write_traces(
                    self.uri, self.experiment_id, build_traces(queries, self.experiment_id, run_id)
                )
            self.client.set_terminated(
                run_id, status="FAILED" if failed else "FINISHED", end_time=_now_ms()
            )
        return run_id


def finished_in_sqlite(path: Path, experiment: str, config_hash: str) -> CellResult | None:
    """The newest active FINISHED run of ``experiment`` tagged ``config_hash`` in the SQLite
    store at ``path``, as MLflow's search would find it; None when the file does not exist.
    Read-only (``mode=ro``): it never creates the store or takes its lock, as WAL readers need
    none."""
    if not path.is_file():
        return None
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)) as db:
        found = db.execute(
            "SELECT r.run_uuid FROM runs r "
            "JOIN experiments e ON e.experiment_id = r.experiment_id "
            "JOIN tags t ON t.run_uuid = r.run_uuid "
            "WHERE e.name = ? AND t.key = 'config_hash' AND t.value = ? "
            "AND r.status = 'FINISHED' AND r.lifecycle_stage = 'active' "
            "ORDER BY r.start_time DESC, r.run_uuid LIMIT 1",
            (experiment, config_hash),
        ).fetchone()
        if found is None:
            return None
        run_id = found[0]
        tags = dict(db.execute('SELECT "key", value FROM tags WHERE run_uuid = ?', (run_id,)))
        metrics = {
            key: float("nan") if is_nan else float(value)
            for key, value, is_nan in db.execute(
                'SELECT "key", value, is_nan FROM latest_metrics WHERE run_uuid = ?', (run_id,)
            )
        }
    return _read(run_id, tags, metrics, f"sqlite:///{path}")


def _read(
    run_id: str, tags: Mapping[str, str], metrics: Mapping[str, float], uri: str
) -> CellResult:
    """A finished run of a cell, read as the record it is (``CellResult.from_run``)."""
    return CellResult.from_run(run_id, dict(tags), dict(metrics), tracking_uri=uri)


def finished_hashes(path: Path, experiment: str, hashes: Iterable[str]) -> set[str]:
    """Which of ``hashes`` (cells' ``config_hash``) have an active FINISHED run of
    ``experiment`` in the SQLite store at ``path``: one read-only query, as
    ``finished_in_sqlite`` asks for one (none when the file does not exist)."""
    wanted = sorted(set(hashes))
    if not wanted or not path.is_file():
        return set()
    found: set[str] = set()
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)) as db:
        for start in range(0, len(wanted), 500):  # SQLite's limit on a query's parameters
            part = wanted[start : start + 500]
            found.update(
                row[0]
                for row in db.execute(
                    "SELECT DISTINCT t.value FROM runs r "
                    "JOIN experiments e ON e.experiment_id = r.experiment_id "
                    "JOIN tags t ON t.run_uuid = r.run_uuid "
                    "WHERE e.name = ? AND t.key = 'config_hash' "
                    f"AND t.value IN ({','.join('?' * len(part))}) "
                    "AND r.status = 'FINISHED' AND r.lifecycle_stage = 'active'",
                    (experiment, *part),
                )
            )
    return found


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` tracking URI; None for any other store."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def require_store(uri: str, remedy: str) -> None:
    """Refuse to read a SQLite store that does not exist yet (reading would create an empty
    one), saying how to make it."""
    from tabmem.errors import TabmemError

    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        raise TabmemError(f"No MLflow store at {path}; {remedy}")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _create_sqlite_whole(uri: str) -> None:
    """Create a new SQLite store's tables in a file beside it and move it into place whole.

    MLflow migrates a new store table by table, and SQLite commits each change to the schema
    as it goes: a grid killed meanwhile (Ctrl-C, SIGKILL, a job's time limit) left a store
    half migrated that every later run failed to open ("duplicate column name"). Called
    under the store's lock; an existing file is left as it is."""
    path = sqlite_path(uri)
    if path is None or path.exists():
        return
    from mlflow.store.db.utils import _initialize_tables, create_sqlalchemy_engine_with_retry

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    try:
        engine = create_sqlalchemy_engine_with_retry(f"sqlite:///{partial}")
        try:
            _initialize_tables(engine)
        finally:
            engine.dispose()
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _use_wal(uri: str) -> None:
    """Put a SQLite store in WAL mode (kept in the file) and make this process's connections
    commit with ``synchronous=NORMAL``: safe against crashes of the process, far cheaper per
    commit than the default, which syncs the whole database on every transaction."""
    path = sqlite_path(uri)
    if path is None:
        return
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    try:
        with closing(sqlite3.connect(path, timeout=60)) as connection:
            if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError as exc:  # only slower commits: never fail a grid for it
        logging.getLogger(__name__).warning("MLflow store left out of WAL mode: %s", exc)
    if not event.contains(Engine, "connect", _normal_sync):
        event.listen(Engine, "connect", _normal_sync)


def _normal_sync(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")


def _param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."


def _finite(value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return number == number and abs(number) != float("inf")
