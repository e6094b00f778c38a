"""A real Hydra multirun over the reference models, read back from a real MLflow store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from harness import ONE_PROCESS, run_here
from mlflow.tracking import MlflowClient

GRID = [
    "-m",
    "model=oracle-memorizer,oracle-marginal,oracle-null",
    "dataset=iris,titanic,adult",
    "test=header",
]


def run_cells(outputs: Path, *args: str) -> subprocess.CompletedProcess:
    return run_here(outputs, *args, "experiment=sweep-test", ONE_PROCESS)


def runs_by_cell(outputs: Path) -> dict[tuple[str, str], object]:
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("sweep-test")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    return {(r.data.tags["model"], r.data.tags["dataset"]): r for r in runs}, client


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    first = run_cells(outputs, *GRID)
    assert first.returncode == 0, first.stderr[-3000:]
    return outputs, first


def test_every_cell_is_one_finished_run_with_the_right_verdict(swept):
    outputs, _ = swept
    runs, _ = runs_by_cell(outputs)
    assert len(runs) == 9
    for (model, dataset), run in runs.items():
        assert run.info.status == "FINISHED", (model, dataset)
        expected = "evidence" if model == "oracle-memorizer" else "no_evidence"
        assert run.data.tags["verdict"] == expected, (model, dataset, run.data.tags.get("reason"))
        assert run.data.params["test.name"] == "header"
        assert run.data.metrics["n_queries"] == 4
        assert run.data.metrics["n_failed_queries"] == 0, (model, dataset)


def test_queries_table_holds_prompts_and_completions(swept):
    outputs, _ = swept
    runs, client = runs_by_cell(outputs)
    run = runs[("oracle-memorizer", "iris")]
    path = client.download_artifacts(run.info.run_id, "queries.json", str(outputs / "dl"))
    table = json.loads(Path(path).read_text())
    columns = table["columns"]
    assert {"prompt", "expected", "completion", "score"} <= set(columns)
    rows = [dict(zip(columns, row, strict=True)) for row in table["data"]]
    assert len(rows) == 4
    assert all(r["completion"].startswith(r["expected"][:20]) for r in rows)
    assert "sepal_length" in rows[0]["prompt"]


def test_summary_table_is_printed(swept):
    _, first = swept
    assert "tabmem summary" in first.stdout
    assert "9 finished, 0 skipped, 0 failed" in first.stdout


def test_second_invocation_skips_and_forced_rerun_hits_the_cache(swept):
    outputs, _ = swept
    again = run_cells(outputs, *GRID)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 finished, 9 skipped, 0 failed" in again.stdout
    # a skipped cell shows its stored run's verdict and hits, not dashes
    assert again.stdout.count("no_evidence") == 6 and again.stdout.count(" 4/4 ") == 3
    forced = run_cells(outputs, *GRID, "force=true")
    assert forced.returncode == 0, forced.stderr[-3000:]
    _, client = runs_by_cell(outputs)
    experiment = client.get_experiment_by_name("sweep-test")
    all_runs = client.search_runs([experiment.experiment_id], max_results=1000)
    assert len(all_runs) == 18
    forced_runs = sorted(all_runs, key=lambda r: r.info.start_time)[9:]
    assert all(r.data.metrics["model_calls"] == 0 for r in forced_runs)
    assert all(r.data.metrics["cache_hits"] == 4 for r in forced_runs)


def test_a_cell_without_its_file_stops_the_grid_before_any_cell_runs(tmp_path):
    """Issue 56: a missing data file is found before the grid starts (it used to be a FAILED
    run beside the others); each problem once, with the cells it stops, and nothing logged.
    Failures no check can foresee still end their cell only (test_faults.py)."""
    result = run_cells(tmp_path, "-m", "model=oracle-null", "dataset=iris,fico", "test=header")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "this grid cannot start (1 problem; nothing was run or logged)" in result.stderr
    [said] = [line for line in result.stderr.splitlines() if "Dataset 'fico'" in line]
    assert "dataset.path=" in said and said.endswith(
        "(cell oracle-null | fico | header | original)"
    )
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_experiment_by_name("sweep-test") is None
