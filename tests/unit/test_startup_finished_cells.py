"""A finished cell is recognised before the data, the model and MLflow are loaded (issue 41):
the store answers from SQLite, the same run MLflow's search finds, and the skipped cell keeps
its stored verdict, hits and p-value."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tabmem.tracking.store import TrackingStore


def _store(folder: Path) -> TrackingStore:
    return TrackingStore.at(folder, "startup")


def _log(store: TrackingStore, digest: str, failed: bool = False, p: float = 0.01) -> str:
    return store.log_cell(
        "cell",
        {"config_hash": digest, "verdict": "evidence"},
        {"seed": 0},
        {"n_hits": 3, "n_queries": 4, "p_value": p},
        {},
        {},
        failed=failed,
    )


def test_the_sqlite_lookup_finds_the_run_mlflow_finds_without_opening_mlflow(tmp_path):
    writer = _store(tmp_path)
    _log(writer, "h1", p=0.5)
    newest = _log(writer, "h1", p=0.01)
    _log(writer, "h1", failed=True)
    deleted = _log(writer, "h2")
    writer.client.delete_run(deleted)
    reader = _store(tmp_path)
    found = reader.finished("h1")
    assert reader._client is None  # answered by sqlite3 alone
    assert found.run_id == newest and found.status == "finished"
    assert found.metrics == {"n_hits": 3.0, "n_queries": 4.0, "p_value": 0.01}
    assert (found.verdict, found.n_hits, found.n_queries) == ("evidence", 3, 4)
    assert found.figure == "3/4 (p=0.01)"
    assert reader.finished("h2") is None and reader.finished("nope") is None
    assert reader._client is None
    assert writer.finished("h1") == found  # the client's search, on the open store


def test_no_store_file_is_no_finished_run_and_creates_nothing(tmp_path):
    store = _store(tmp_path)
    assert store.finished("h1") is None
    assert not (tmp_path / "mlflow.db").exists()


def test_a_first_write_opens_the_client_under_the_lock_it_then_writes_under(tmp_path):
    store = _store(tmp_path)
    run_id = _log(store, "h1")  # the client opens inside log_cell: no second lock taken
    assert store.finished_run("h1") == run_id


def test_a_finished_cell_is_skipped_without_the_data_the_model_or_mlflow(tmp_path):
    """In a fresh interpreter, as ``tabmem run`` would: the cell's stored figures come back."""
    overrides = [
        "model=oracle-memorizer",
        "dataset=iris",
        "test=header",
        f"outputs_dir={tmp_path}",
        "progress=false",
        "show_queries=false",
    ]
    script = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        from omegaconf import OmegaConf
        from rich.console import Console
        from tabmem.api import compose_config
        from tabmem.runner import run_cell

        cfg = compose_config({overrides!r})
        [outcome] = run_cell(cfg, OmegaConf.to_yaml(cfg), Path(sys.argv[1]), Console(quiet=True))
        heavy = [m for m in ("mlflow", "pandas", "scipy", "sqlalchemy", "tabmem.battery")
                 if m in sys.modules]
        print(json.dumps({{"status": outcome.status, "verdict": outcome.verdict,
                          "figure": outcome.figure, "run_id": outcome.run_id,
                          "heavy": heavy}}))
        """
    )

    def cell(job: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / job)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = cell("first")
    assert first["status"] == "finished" and first["verdict"] == "evidence"
    again = cell("again")
    assert again["heavy"] == []
    assert again["status"] == "skipped"
    assert (again["verdict"], again["figure"], again["run_id"]) == (
        first["verdict"],
        first["figure"],
        first["run_id"],
    )
