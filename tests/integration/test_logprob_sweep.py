"""The log-probability tests in a real sweep: a model without log-probabilities gets
not_applicable cells (with the reason), logged as finished runs, never failures."""

from __future__ import annotations

from harness import ONE_PROCESS, run_here
from mlflow.tracking import MlflowClient


def test_logprob_tests_are_not_applicable_on_a_model_without_logprobs(tmp_path):
    result = run_here(
        tmp_path,
        "-m",
        "model=oracle-memorizer",
        "dataset=iris,titanic",
        "test=min_k_prob,row_order",
        "experiment=logprob-test",
        ONE_PROCESS,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "4 finished, 0 skipped, 0 failed" in result.stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("logprob-test")
    found = client.search_runs([experiment.experiment_id])
    runs = [r for r in found if r.data.tags.get("scope") != "dataset"]
    assert len(runs) == 4
    # the two tests of rows seen on each file join a dataset verdict, which cannot decide either
    combined = [r for r in found if r.data.tags.get("scope") == "dataset"]
    assert sorted(r.data.tags["dataset"] for r in combined) == ["iris", "titanic"]
    assert {r.data.tags["verdict"] for r in combined} == {"not_applicable"}
    by_cell = {(r.data.tags["dataset"], r.data.tags["test"]): r for r in runs}
    for (dataset, test), run in by_cell.items():
        assert run.data.tags["verdict"] == "not_applicable", (dataset, test)
        assert run.info.status == "FINISHED"
        assert run.data.metrics["n_queries"] == 0
    for key, run in by_cell.items():
        assert "gives no log-probabilities" in run.data.tags["reason"], key
