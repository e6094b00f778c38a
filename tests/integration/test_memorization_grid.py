"""The memorization suite as a real Hydra sweep over the reference models, read from MLflow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import ONE_PROCESS, run_here, settings_of
from mlflow.tracking import MlflowClient

EXPERIMENT = "memorization-grid"
MODELS = ("oracle-memorizer", "oracle-marginal", "oracle-null")
DATASETS = ("openml-diabetes",)
TESTS = ("header", "row_completion", "feature_completion", "first_token")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    done = run_here(
        outputs,
        "-m",
        f"model={','.join(MODELS)}",
        f"dataset={','.join(DATASETS)}",
        "test=memorization",
        f"experiment={EXPERIMENT}",
        ONE_PROCESS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    found = client.search_runs([experiment.experiment_id], max_results=1000)
    by_cell = {
        (r.data.tags["model"], r.data.tags["dataset"], r.data.tags["test"]): r
        for r in found
        if r.data.tags.get("scope") != "dataset"
    }
    datasets = {
        (r.data.tags["model"], r.data.tags["dataset"]): r
        for r in found
        if r.data.tags.get("scope") == "dataset"
    }
    assert len(datasets) == sum(r.data.tags.get("scope") == "dataset" for r in found)
    return by_cell, client, outputs, datasets, done.stdout


def test_every_member_of_the_suite_is_one_finished_run(runs):
    by_cell, *_ = runs
    assert set(by_cell) == {(m, d, t) for m in MODELS for d in DATASETS for t in TESTS}
    for key, run in by_cell.items():
        assert run.info.status == "FINISHED", key
        assert run.data.tags["suite"] == "memorization"


def test_memorizer_is_evidence_and_the_others_never_are(runs):
    by_cell, *_ = runs
    for (model, dataset, test), run in by_cell.items():
        verdict = run.data.tags["verdict"]
        if verdict == "not_applicable":
            assert run.data.tags["reason"], (model, dataset, test)
            continue
        expected = {"evidence"} if model == "oracle-memorizer" else {"no_evidence", "ambiguous"}
        assert verdict in expected, (model, dataset, test, run.data.tags["reason"])


def test_every_test_applies_to_this_unordered_file(runs):
    by_cell, *_ = runs
    assert all(run.data.tags["verdict"] != "not_applicable" for run in by_cell.values())


def test_statistics_are_logged(runs):
    by_cell, *_ = runs
    row = by_cell[("oracle-memorizer", "openml-diabetes", "row_completion")].data.metrics
    assert row["n_queries"] == 25 and row["n_hits"] == 25
    assert row["p_value"] < 1e-10 and row["baseline"] < 0.01
    assert row["rows_ordered"] == 0.0 and row["similarity_p_value"] < 0.01
    feature = by_cell[("oracle-marginal", "openml-diabetes", "feature_completion")]
    assert feature.data.params["test.feature"] == "None"
    assert feature.data.metrics["unique_fraction"] == pytest.approx(517 / 768)
    token = by_cell[("oracle-null", "openml-diabetes", "first_token")].data.metrics
    assert 0.0 < token["baseline"] < 0.5
    assert 0.0 <= token["mcnemar_p_value"] <= 1.0


def test_first_token_reuses_row_completion_answers_from_the_cache(runs):
    by_cell, *_ = runs
    for model in MODELS:
        metrics = by_cell[(model, "openml-diabetes", "first_token")].data.metrics
        assert metrics["model_calls"] == 0 and metrics["cache_hits"] == 25


def test_every_query_is_in_mlflow_with_prompt_and_completion(runs):
    by_cell, client, outputs, *_ = runs
    run = by_cell[("oracle-memorizer", "openml-diabetes", "feature_completion")]
    path = client.download_artifacts(run.info.run_id, "queries.json", str(outputs / "dl"))
    table = json.loads(Path(path).read_text())
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    assert len(rows) == settings_of("feature_completion")["n_queries"]
    assert all(r["prompt"].endswith("DiabetesPedigreeFunction =") for r in rows)
    assert all(r["completion"] == r["expected"] for r in rows)


def test_one_dataset_verdict_per_model_combines_the_suite(runs):
    by_cell, _, _, datasets, stdout = runs
    assert set(datasets) == {(m, d) for m in MODELS for d in DATASETS}
    for (model, dataset), run in datasets.items():
        tags, metrics = run.data.tags, run.data.metrics
        assert run.info.status == "FINISHED" and tags["test"] == "dataset"
        assert set(tags["combined_tests"].split(",")) == set(TESTS)
        for test in TESTS:
            member = by_cell[(model, dataset, test)]
            assert tags[f"test.{test}.run_id"] == member.info.run_id
            assert tags[f"test.{test}.verdict"] == member.data.tags["verdict"]
        expected = "evidence" if model == "oracle-memorizer" else "no_evidence"
        assert tags["verdict"] == expected, tags["reason"]
        assert (metrics["p_value"] < 0.001) == (expected == "evidence")
        assert run.data.params["model.name"] == model
        assert metrics["q_family"] == len(MODELS)  # the grid's verdicts, one q each
        assert metrics["p_value"] <= metrics["q_value"] <= len(MODELS) * metrics["p_value"]
        assert "false discovery rate" in tags["q_value_controls"]
        assert (
            metrics["p_value.header"] == by_cell[(model, dataset, "header")].data.metrics["p_value"]
        )  # the header enters the combination by its p-value
    assert "tabmem summary: one answer per model × dataset" in stdout
    assert "grid q" in stdout and "Benjamini-Hochberg" in stdout
