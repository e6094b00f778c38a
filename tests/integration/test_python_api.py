"""The Python API runs the CLI's cells: the same MLflow record as ``python run.py`` (Hydra's
command line, here in this process), finished cells read back, DataFrames as datasets and Python
callables as models (oracle models, small query counts, temporary outputs)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from harness import run_here
from mlflow.tracking import MlflowClient

import tabmem

ROOT = Path(__file__).resolve().parents[2]
CELL = {"model": "oracle-memorizer", "dataset": "iris", "test": "row_completion"}
QUIET = {"progress": False, "show_queries": False, "quiet": True}
IRIS_ROWS = (ROOT / "data" / "iris.csv").read_text(encoding="utf-8").splitlines()[1:]


def only_run(outputs: Path):
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("tabmem")
    (run,) = client.search_runs([experiment.experiment_id])
    return run


def test_api_and_cli_log_the_same_cell(tmp_path: Path) -> None:
    cli_out, api_out = tmp_path / "cli", tmp_path / "api"
    cli_done = run_here(cli_out, *(f"{k}={v}" for k, v in CELL.items()), "test.n_queries=4")
    assert cli_done.returncode == 0, cli_done.stderr[-3000:]
    result = tabmem.run(**CELL, test__n_queries=4, outputs_dir=str(api_out), **QUIET)
    cli, api = only_run(cli_out), only_run(api_out)
    assert api.info.run_id == result.run_id
    assert api.data.metrics == cli.data.metrics
    for tag in ("verdict", "reason", "config_hash", "model", "dataset", "test", "transform"):
        assert api.data.tags[tag] == cli.data.tags[tag], tag
    assert api.data.params == cli.data.params
    assert result.verdict == cli.data.tags["verdict"] == "evidence"
    assert (result.n_queries, result.n_hits) == (4, cli.data.metrics["n_hits"])
    assert len(result.queries) == 4
    assert set(result.queries.columns) >= {"prompt", "expected", "completion", "score"}

    again = tabmem.run(**CELL, test__n_queries=4, outputs_dir=str(api_out), **QUIET)
    assert (again.status, again.run_id, again.verdict) == ("skipped", result.run_id, "evidence")
    forced = tabmem.run(**CELL, test__n_queries=4, outputs_dir=str(api_out), force=True, **QUIET)
    assert forced.status == "finished" and forced.run_id != result.run_id
    assert forced.metrics["n_hits"] == result.metrics["n_hits"]


def test_a_titanic_frame_gets_the_verdicts_of_the_titanic_config(tmp_path: Path) -> None:
    frame = pd.read_csv(ROOT / "data" / "titanic-train.csv")
    models = ["oracle-memorizer", "oracle-null"]
    common = {"models": models, "outputs_dir": str(tmp_path), **QUIET}
    small = {"tests": ["row_completion"], "test__n_queries": 4}

    def both(datasets) -> pd.DataFrame:
        return pd.concat(
            [
                tabmem.grid(datasets=datasets, tests=["header"], **common),
                tabmem.grid(datasets=datasets, **small, **common),
            ],
            ignore_index=True,
        )

    by_config = both(["titanic"])
    by_frame = both({"my-titanic": frame})
    assert set(by_frame["dataset"]) == {"my-titanic"}
    assert list(by_frame["verdict"]) == list(by_config["verdict"])
    assert list(by_frame["verdict"]) == ["evidence", "no_evidence", "evidence", "no_evidence"]
    assert list(by_frame["n_hits"]) == list(by_config["n_hits"])
    (written,) = (tmp_path / "datasets").glob("my-titanic-*.csv")
    assert written.read_bytes() == (ROOT / "data" / "titanic-train.csv").read_bytes()

    same = tabmem.grid(datasets={"my-titanic": frame.copy()}, tests=["header"], **common)
    assert set(same["status"]) == {"skipped"}
    assert list(same["run_id"]) == list(by_frame["run_id"][:2])


def next_iris_row(prompt: str) -> str:
    """A model that knows iris.csv: the row after the prompt's last data row."""
    last = prompt.rstrip("\n").rsplit("\n", 1)[-1]
    at = IRIS_ROWS.index(last) if last in IRIS_ROWS else -1
    return IRIS_ROWS[at + 1] + "\n" if 0 <= at < len(IRIS_ROWS) - 1 else ""


class FixedAnswer:
    """A model object with a complete method that always gives the same row."""

    def complete(self, prompt: str, max_tokens: int) -> str:
        return "5.0,3.0,1.5,0.2,Iris-setosa\n"


def test_python_models_are_tested_and_logged_under_their_names(tmp_path: Path) -> None:
    frame = tabmem.grid(
        models={"knows-iris": next_iris_row, "fixed": FixedAnswer()},
        datasets=["iris"],
        tests=["row_completion"],
        test__n_queries=6,
        outputs_dir=str(tmp_path),
        **QUIET,
    )
    assert list(frame["model"]) == ["knows-iris", "fixed"]
    assert list(frame["verdict"]) == ["evidence", "no_evidence"]
    assert list(frame["n_hits"]) == [6, 0]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    for run_id, name in zip(frame["run_id"], frame["model"], strict=True):
        run = client.get_run(run_id)
        assert run.data.tags["model"] == name == run.data.params["model.name"]
        assert run.data.params["model.backend"] == "python"
    assert (
        client.get_run(frame["run_id"][0])
        .data.params["model.callable"]
        .endswith("test_python_api.next_iris_row")
    )
