"""The tracking store: experiments that open on runs, runs with real times and a description."""

from __future__ import annotations

import sqlite3
import time

from tabmem.tracking.store import TrackingStore


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
