"""The memorization tests on the embedded models, for real (slow): every query reaches MLflow.

openml-diabetes: every test applies there with 5 queries (its first-token baseline, about
0.16, leaves the binomial test its power), and its rows are short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
TESTS = ("row_completion", "first_token", "feature_completion")
MODELS = ("smollm2-135m", "gemma3-270m")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    done = subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            f"model={','.join(MODELS)}",
            "dataset=openml-diabetes",
            f"test={','.join(TESTS)}",
            "test.n_queries=5",
            "hydra.launcher.n_jobs=1",
            f"outputs_dir={outputs}",
            "progress=false",
            "show_queries=false",
            "experiment=memorization-embedded",
        ],
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("memorization-embedded")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    members = [r for r in runs if r.data.tags.get("scope") != "dataset"]
    return {(r.data.tags["model"], r.data.tags["test"]): r for r in members}, client, outputs


def download(client, run, name, outputs):
    return Path(client.download_artifacts(run.info.run_id, name, str(outputs / run.info.run_id)))


def test_every_cell_finishes_with_a_verdict(swept):
    runs, _, _ = swept
    assert set(runs) == {(m, t) for m in MODELS for t in TESTS}
    for key, run in runs.items():
        assert run.info.status == "FINISHED", key
        assert run.data.tags["verdict"] in {"evidence", "no_evidence", "ambiguous"}, key
        assert run.data.metrics["n_queries"] == 5, key
        assert run.data.metrics["n_failed_queries"] == 0, key


def test_every_query_has_its_prompt_and_completion_in_mlflow(swept):
    runs, client, outputs = swept
    for key, run in runs.items():
        table = json.loads(download(client, run, "queries.json", outputs).read_text())
        rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
        assert len(rows) == 5, key
        assert all(r["prompt"] and r["expected"] for r in rows), key
        assert all(isinstance(r["completion"], str) for r in rows), key
        assert any(r["completion"].strip() for r in rows), key


def test_first_token_uses_the_model_tokenizer(swept):
    runs, client, outputs = swept
    for model in MODELS:
        run = runs[(model, "first_token")]
        result = yaml.safe_load(download(client, run, "result.yaml", outputs).read_text())
        assert result["info"]["tokenizer"] == "model"
        assert run.data.params["model.prompt_form"] in {"chat", "completion"}
