"""The paper grid's parts as a real Hydra sweep (reference model, a baseline, a shipped and a
user-provided dataset), then ``tabmem tables`` (scripts/paper_tables.py) on the store it wrote,
both in this process."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from harness import ONE_PROCESS, call_here, run_here
from mlflow.tracking import MlflowClient

from tabmem.cli import tables

EXPERIMENT = "paper-cli"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    sweep = run_here(
        outputs,
        "-m",
        "+paper=memorization,fewshot-original",
        "model=oracle-memorizer,logistic-regression",
        "dataset=iris,fico",
        "+skip_unrunnable=true",
        ONE_PROCESS,
        f"experiment={EXPERIMENT}",
    )
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    uri = f"sqlite:///{outputs / 'mlflow.db'}"
    written = call_here(
        tables, "--tracking-uri", uri, "--experiment", EXPERIMENT, "--out", str(outputs / "paper")
    )
    assert written.returncode == 0, written.stderr[-3000:]
    return outputs, uri, " ".join(sweep.stdout.split()), written.stdout


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
    assert "Empty, no run yet: " in printed  # the tables no part of this sweep fills
    overview = read(out, "overview").set_index("dataset")
    assert overview.loc["iris", "model"] == "oracle-memorizer"
    assert overview.loc["iris", "header"] == "✓"
    assert overview.loc["iris", "row completion"] == "✓"
    assert overview.loc["iris", "feature names"] == "-†"
    assert "fico" not in overview.index  # no run: named in a footnote, not a row of dashes
    assert "No run yet on " in (out / "overview.md").read_text()
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
    helped = call_here(tables, "--help")
    assert helped.returncode == 0
    for option in ("--tracking-uri", "--experiment", "--models", "--out"):
        assert option in helped.stdout
    missing = call_here(tables, "--tracking-uri", f"sqlite:///{tmp_path}/none.db")
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: No MLflow store at")
    assert not (tmp_path / "none.db").exists()
