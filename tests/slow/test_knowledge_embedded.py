"""The knowledge and learning tests on the embedded models, for real (slow): the suite completes,
with samples, statistics and figures as MLflow artifacts, in chat and plain-completion form."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from harness import run_tabmem
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
FEW = [
    "test.sample.n_samples=4",
    "test.feature_values.sampler.n_samples=4",
    "test.feature_distribution.sampler.n_samples=4",
    "test.conditional_distribution.sampler.n_samples=4",
    "test.conditional_completion.n_per_feature=1",
    "test.dataset_name.row_counts=[3]",
    "test.dataset_name.controls=1",
]
VERDICTS = {"evidence", "no_evidence", "ambiguous", "not_applicable"}


def run_cells(outputs: Path, *args: str) -> subprocess.CompletedProcess:
    return run_tabmem(outputs, *args, "hydra.launcher.n_jobs=1", timeout=3000)


def finished_runs(outputs: Path) -> tuple[MlflowClient, dict[str, object]]:
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("tabmem")
    runs = client.search_runs(
        [experiment.experiment_id], filter_string="attributes.status = 'FINISHED'"
    )
    return client, {r.data.tags["test"]: r for r in runs if r.data.tags.get("scope") != "dataset"}


def test_knowledge_suite_completes_on_the_chat_model(tmp_path):
    result = run_cells(tmp_path, "model=smollm2-135m", "dataset=iris", "test=knowledge", *FEW)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "7 finished, 0 skipped, 0 failed" in result.stdout
    client, runs = finished_runs(tmp_path)
    assert len(runs) == 7
    for test, run in runs.items():
        assert run.data.tags["verdict"] in VERDICTS, test
        assert run.data.params["model.prompt_form"] == "chat"
    sample = runs["sample"]
    assert sample.data.metrics["samples_requested"] == 4
    counted = sum(
        sample.data.metrics[k]
        for k in ("samples_complete", "samples_invalid", "samples_failed_queries")
    )
    assert counted == 4
    artifacts = {a.path for a in client.list_artifacts(sample.info.run_id)}
    assert {"samples.json", "queries.json", "result.yaml"} <= artifacts
    path = client.download_artifacts(sample.info.run_id, "samples.json", str(tmp_path / "dl"))
    assert len(json.loads(Path(path).read_text())["data"]) == 4
    completion = runs["conditional_completion"]
    assert completion.data.metrics["n_queries"] == 4  # one for each feature after the first
    assert "conditional_completion.png" in {
        a.path for a in client.list_artifacts(completion.info.run_id)
    }


def test_base_model_answers_in_plain_completion_form(tmp_path):
    sampled = run_cells(
        tmp_path, "model=gemma3-270m", "dataset=iris", "test=sample", "test.n_samples=4"
    )
    assert sampled.returncode == 0, sampled.stderr[-3000:]
    completed = run_cells(
        tmp_path,
        "model=gemma3-270m",
        "dataset=iris",
        "test=conditional_completion",
        "test.n_per_feature=1",
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    _, runs = finished_runs(tmp_path)
    for test in ("sample", "conditional_completion"):
        run = runs[test]
        assert run.data.params["model.prompt_form"] == "completion"
        assert run.data.tags["verdict"] in VERDICTS, test
        assert run.data.metrics["n_failed_queries"] == 0, test
    assert runs["sample"].data.metrics["samples_requested"] == 4
