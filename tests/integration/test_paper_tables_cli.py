"""The paper grid's parts as a real Hydra sweep (reference model, a baseline, a shipped and a
user-provided dataset), then scripts/paper_tables.py on the store it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from harness import seed_store
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = "paper-cli"
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    seed_store(outputs / "mlflow.db")
    sweep = run(
        "run.py",
        "-m",
        "+paper=memorization,fewshot-original",
        "model=oracle-memorizer,logistic-regression",
        "dataset=iris,fico",
        "+skip_unrunnable=true",
        "hydra/launcher=basic",  # one process: the cells are small, imports dominate
        f"outputs_dir={outputs}",
        f"experiment={EXPERIMENT}",
        "progress=false",
        "show_queries=false",
    )
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    uri = f"sqlite:///{outputs / 'mlflow.db'}"
    tables = run(
        "scripts/paper_tables.py",
        "--tracking-uri",
        uri,
        "--experiment",
        EXPERIMENT,
        "--out",
        str(outputs / "paper"),
    )
    assert tables.returncode == 0, tables.stderr[-3000:]
    return outputs, uri, " ".join(sweep.stdout.split()), tables.stdout


def read(out: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(out / f"{name}.csv", keep_default_na=False, dtype=str)


def test_unrunnable_cells_are_skipped_with_their_reason_not_failed(swept):
    _, uri, stdout, _ = swept
    assert "6 finished, 14 skipped, 0 failed" in stdout
    assert "dataset file not present: Dataset 'fico' needs a file you provide" in stdout
    assert "is a statistical baseline: it runs learning tests only" in stdout
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id])
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert {r.data.tags["dataset"] for r in runs} == {"iris"}


def test_tables_come_from_the_sweep_and_name_what_is_missing(swept):
    outputs, uri, _, printed = swept
    out = outputs / "paper"
    assert "tables and" in printed and str(out / "index.md") in printed
    overview = read(out, "overview").set_index("dataset")
    assert overview.loc["iris", "header"] == "✓"
    assert overview.loc["iris", "row completion"] == "✓"
    assert overview.loc["iris", "feature names"] == "-†"
    assert set(overview.loc["fico"]) == {"-†"}
    fewshot = read(out, "fewshot_accuracy")
    lr = fewshot[(fewshot["dataset"] == "iris") & (fewshot["model"] == "LR")]
    assert " ± " in lr["original"].iloc[0]
    assert lr["perturbed"].iloc[0] == "-"
    sources = pd.read_csv(out / "fewshot_accuracy.sources.csv")
    client = MlflowClient(tracking_uri=uri)
    for run_id, value in zip(sources["run_id"], sources["value"], strict=True):
        accuracy = client.get_run(run_id).data.metrics["accuracy"]
        assert value.startswith(f"{accuracy:.2f}")
    text = (out / "fewshot_accuracy.md").read_text()
    assert "transform=perturbed,task,statistical" in text
    assert f"experiment={EXPERIMENT}" in text
    for name in ("statistical_learning.png", "accuracy_difference_to_lr.pdf", "index.md"):
        assert (out / name).is_file()


def test_help_and_a_missing_store(tmp_path):
    helped = run("scripts/paper_tables.py", "--help", timeout=120)
    assert helped.returncode == 0
    for option in ("--tracking-uri", "--experiment", "--models", "--out"):
        assert option in helped.stdout
    missing = run(
        "scripts/paper_tables.py", "--tracking-uri", f"sqlite:///{tmp_path}/none.db", timeout=120
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: No MLflow store at")
    assert not (tmp_path / "none.db").exists()
