"""Rescoring a run's own queries.json on a user's file, with no flags (issue 40, item 8): the
rescored run keeps the name the run gave the file (``dataset.name``), not the file's stem, so
both runs fall in one column of the paper tables and of the report page."""

from __future__ import annotations

from pathlib import Path

from harness import call_here, run_here
from mlflow.tracking import MlflowClient

from tabmem.rescore.cli import main as rescore


def _semicolon_file(folder: Path) -> Path:
    lines = ["id;name;height;weight"]
    lines += [f"{i};person{i};{150 + (7 * i) % 50};{50 + (11 * i) % 60}" for i in range(1, 61)]
    path = folder / "semicolon.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_users_file_keeps_its_name_when_its_queries_are_rescored(tmp_path):
    data, outputs = _semicolon_file(tmp_path), tmp_path / "outputs"
    done = run_here(
        outputs,
        "model=oracle-null",
        "dataset=csv",
        f"dataset.path={data}",
        "dataset.name=semi",
        "test=feature_completion",
        "tracking.traces=false",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{outputs / 'mlflow.db'}")
    (live,) = client.search_runs([client.get_experiment_by_name("tabmem").experiment_id])
    queries = Path(client.download_artifacts(live.info.run_id, "queries.json", str(tmp_path)))
    client.download_artifacts(live.info.run_id, "config.yaml", str(tmp_path))

    again = call_here(rescore, str(queries), f"--outputs-dir={outputs}")
    assert again.returncode == 0, again.stderr[-3000:]
    (rescored,) = client.search_runs([client.get_experiment_by_name("rescore").experiment_id])
    assert rescored.data.tags["dataset"] == "semi"
    assert rescored.data.tags["verdict"] == live.data.tags["verdict"]
    assert rescored.data.metrics["n_queries"] == live.data.metrics["n_queries"] == 50
