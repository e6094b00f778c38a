"""test=knowledge as a real Hydra multirun over the reference models (real HTTP), read back
from a real MLflow store: verdicts, shared samples, tables and figures as artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import ONE_PROCESS, run_here
from mlflow.tracking import MlflowClient

SMALL_POOL = "[wine,icu,openml-diabetes,scikit-diabetes]"
GRID = [
    "-m",
    "model=oracle-memorizer,oracle-marginal,oracle-null",
    "dataset=iris",
    "test=knowledge",
    # fewer queries than the defaults, and small datasets for the few-shot examples
    "test.sample.n_samples=30",
    "test.feature_values.sampler.n_samples=30",
    "test.feature_distribution.sampler.n_samples=30",
    "test.conditional_distribution.sampler.n_samples=30",
    "test.conditional_completion.n_per_feature=5",
    *[
        f"test.{member}.few_shot_pool={SMALL_POOL}"
        for member in ("feature_names", "dataset_name", "sample", "conditional_completion")
    ],
    *[
        f"test.{member}.sampler.few_shot_pool={SMALL_POOL}"
        for member in ("feature_values", "feature_distribution", "conditional_distribution")
    ],
]
EXPECTED = {
    "oracle-memorizer": {
        "feature_names": "evidence",
        "dataset_name": "evidence",
        "feature_values": "evidence",
        "sample": "evidence",
        "conditional_distribution": "evidence",
        "conditional_completion": "evidence",
    },
    "oracle-marginal": {
        "feature_names": "evidence",
        "dataset_name": "evidence",
        "feature_values": "evidence",
        "sample": "no_evidence",
        "conditional_distribution": "no_evidence",
        "conditional_completion": "no_evidence",
    },
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    result = run_here(outputs, *GRID, ONE_PROCESS, "experiment=knowledge-test")
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("knowledge-test")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    # sample and conditional completion, the suite's tests of rows seen, also join a dataset
    # verdict per model: the members' runs are the others
    by_cell = {
        (r.data.tags["model"], r.data.tags["test"]): r
        for r in runs
        if r.data.tags.get("scope") != "dataset"
    }
    return outputs, client, by_cell, result


def test_every_member_is_a_finished_run_of_the_suite(swept):
    _, _, runs, result = swept
    assert len(runs) == 21
    assert "21 finished, 0 skipped, 0 failed" in result.stdout
    for (model, test), run in runs.items():
        assert run.info.status == "FINISHED", (model, test)
        assert run.data.tags["suite"] == "knowledge"


def test_reference_models_get_the_verdicts_their_knowledge_allows(swept):
    _, _, runs, _ = swept
    for model, verdicts in EXPECTED.items():
        for test, verdict in verdicts.items():
            run = runs[(model, test)]
            assert run.data.tags["verdict"] == verdict, (model, test, run.data.tags["reason"])
    for (model, test), run in runs.items():
        if model == "oracle-null":
            assert run.data.tags["verdict"] in {"no_evidence", "not_applicable"}, test


def test_samples_are_drawn_once_per_cell(swept):
    _, _, runs, _ = swept
    for model in EXPECTED:
        # feature_distribution asks what feature_values asked; conditional_distribution what
        # sample asked: the response cache answers them
        assert runs[(model, "feature_distribution")].data.metrics["model_calls"] == 0
        assert runs[(model, "conditional_distribution")].data.metrics["model_calls"] == 0
        assert runs[(model, "feature_distribution")].data.metrics["cache_hits"] == 30


def test_samples_statistics_and_figures_are_artifacts(swept):
    outputs, client, runs, _ = swept
    sample = runs[("oracle-marginal", "sample")]
    assert sample.data.metrics["samples_complete"] == 30
    assert sample.data.metrics["known_value_share"] == 1.0
    assert sample.data.metrics["best_match_real_rows"] > sample.data.metrics["best_match_samples"]
    path = client.download_artifacts(sample.info.run_id, "samples.json", str(outputs / "dl"))
    table = json.loads(Path(path).read_text())
    assert table["columns"][-5:] == [
        "sepal_length",
        "sepal_width",
        "petal_length",
        "petal_width",
        "species",
    ]
    assert len(table["data"]) == 30
    figures = {
        "conditional_distribution": "correlations.png",
        "conditional_completion": "conditional_completion.png",
    }
    for test, name in figures.items():
        run = runs[("oracle-memorizer", test)]
        assert name in {a.path for a in client.list_artifacts(run.info.run_id)}, test
    null = runs[("oracle-null", "sample")]
    assert null.data.metrics["samples_invalid"] == 30
