"""The tracking store: experiments that open on runs, runs with real times and a description."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import warnings

import pytest

from tabmem.data import dataset_specs, load_dataset
from tabmem.data.transforms import apply_transform
from tabmem.errors import TabmemError
from tabmem.paths import data_dir
from tabmem.tracking.inputs import dataset_input
from tabmem.tracking.store import TrackingStore, is_remote, require_store, tracking_uri


def _store(tmp_path, name: str = "exp") -> TrackingStore:
    return TrackingStore(
        uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_root=tmp_path / "artifacts",
        experiment=name,
        lock_path=tmp_path / "mlflow.lock",
    )


def test_a_new_experiment_is_of_the_model_training_kind_and_the_store_is_in_wal_mode(tmp_path):
    store = _store(tmp_path)
    tags = store.client.get_experiment(store.experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    assert "verdict" in tags["mlflow.note.content"]
    with sqlite3.connect(tmp_path / "mlflow.db") as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_store_stopped_while_its_tables_are_made_leaves_none_behind(tmp_path, monkeypatch):
    """A new store is made beside its path and moved there whole: a grid stopped during the
    migration left a half-made store that no later run could open."""
    import mlflow.store.db.utils as db_utils

    made = db_utils._initialize_tables

    def stopped_halfway(engine):
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE experiments (experiment_id INTEGER)")
        raise KeyboardInterrupt

    monkeypatch.setattr(db_utils, "_initialize_tables", stopped_halfway)
    with pytest.raises(KeyboardInterrupt):
        _store(tmp_path).open_client()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifacts", "mlflow.lock"]
    monkeypatch.setattr(db_utils, "_initialize_tables", made)
    store = _store(tmp_path)
    assert store.client.get_experiment(store.experiment_id).name == "exp"


def test_an_existing_experiment_without_a_kind_gets_one(tmp_path):
    first = _store(tmp_path)
    first.client.delete_experiment_tag(first.experiment_id, "mlflow.experimentKind")
    again = _store(tmp_path)
    tags = again.client.get_experiment(again.experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_run_starts_when_its_cell_started_and_carries_its_description(tmp_path):
    store = _store(tmp_path)
    started = time.time_ns() // 1_000_000 - 90_000
    run_id = store.log_cell(
        "evidence · m · iris · header",
        {"verdict": "evidence"},
        {},
        {"n_queries": 1},
        {},
        {},
        failed=False,
        start_ms=started,
        description="**evidence**: why.",
    )
    run = store.client.get_run(run_id)
    assert run.info.start_time == started
    assert run.info.end_time - run.info.start_time >= 90_000
    assert run.data.tags["mlflow.note.content"] == "**evidence**: why."
    assert run.info.run_name == "evidence · m · iris · header"


def test_the_store_is_tracking_uri_then_mlflow_tracking_uri_then_the_outputs_file(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri(None, tmp_path) == f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    assert tracking_uri(None, tmp_path) == "http://127.0.0.1:5999"
    assert tracking_uri("sqlite:///elsewhere.db", tmp_path) == "sqlite:///elsewhere.db"
    assert is_remote("http://127.0.0.1:5999") and not is_remote("sqlite:///x.db")


def test_a_run_names_its_dataset_as_an_input_with_the_files_sha256(tmp_path):
    iris = load_dataset(dataset_specs()["iris"])
    listed = json.loads((data_dir() / "provenance.json").read_text())["files"]
    sha256 = next(f["sha256"] for f in listed if f["dataset"] == "iris")
    twin = apply_transform(iris, {"name": "twin"}, 0)
    store = _store(tmp_path)
    logged = {}
    for data in (iris, twin):
        run_id = store.log_cell("r", {}, {}, {}, {}, {}, False, dataset=dataset_input(data))
        [found] = store.client.get_run(run_id).inputs.dataset_inputs
        logged[found.dataset.name] = found
    assert set(logged) == {"iris", "iris (twin)"}
    original = logged["iris"]
    assert original.dataset.digest == sha256[:32]
    assert {t.key: t.value for t in original.tags}["tabmem.sha256"] == sha256
    assert json.loads(original.dataset.source)["uri"] == str(iris.path)
    assert json.loads(original.dataset.profile)["num_rows"] == len(iris.rows)
    assert logged["iris (twin)"].dataset.digest != original.dataset.digest


def test_logging_a_dataset_input_prints_no_warning():
    adult = load_dataset(dataset_specs()["adult"])  # integer columns: MLflow hints about them
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dataset_input(adult).dataset.name == "adult"


def test_a_store_leaves_mlflow_tracking_uri_alone(tmp_path, monkeypatch):
    """MLflow's ``set_tracking_uri`` exports the variable to every later subprocess, which
    honours it: a second grid (or ``tabmem.run``) in the same process would write into the
    first one's store."""
    import pandas as pd

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    store = _store(tmp_path)
    table = {"t.json": pd.DataFrame({"a": [1]})}
    store.log_cell("r", {}, {}, {"n": 1}, table, {"x.txt": "x"}, False)
    assert "MLFLOW_TRACKING_URI" not in os.environ


def test_reading_a_missing_sqlite_store_is_refused_and_creates_nothing(tmp_path):
    database = tmp_path / "mlflow.db"
    with pytest.raises(TabmemError, match=f"No MLflow store at {database}; run a grid first"):
        require_store(f"sqlite:///{database}", "run a grid first")
    assert not database.exists()
    database.touch()
    require_store(f"sqlite:///{database}", "run a grid first")
    require_store("http://127.0.0.1:5000", "run a grid first")  # a server is not checked
