"""The minimal contamination lab for real: fine-tune SmolLM2 on CPU, sweep, report (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # trains 24 passes on CPU
pytest.importorskip("peft")


def test_minimal_lab_finds_the_planted_file_and_no_held_out_one(tmp_path):
    result = subprocess.run(
        [sys.executable, "scripts/contamination_lab.py", "minimal", "--outputs-dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    folder = tmp_path / "lab" / "minimal"
    table = pd.read_csv(folder / "tpr_fpr.csv")
    header = table[table["test"] == "header"]
    planted = header[header["group"] == "planted"].sort_values("repetitions")
    assert planted["repetitions"].tolist() == [8, 24]
    assert planted.iloc[-1]["detected"] == 1  # read 24 times: found
    held_out = header[header["group"] == "held out"].iloc[0]
    assert held_out["cells"] == 9  # 3 held-out datasets x 3 checkpoints
    assert held_out["detected"] == 0
    assert (folder / "tpr_fpr.md").read_text().startswith("| test |")
    assert (folder / "tpr_by_repetitions.png").stat().st_size > 0
    assert (folder / "conf" / "model" / "lab-minimal-p24.yaml").is_file()
    truth = pd.read_csv(folder / "ground_truth.csv").set_index(["passes", "dataset"])
    assert len(truth) == 12  # 3 checkpoints x 4 datasets
    assert truth.loc[(24, "iris"), "loss_drop"] > 0  # read 24 times: learned
    assert truth.loc[(0, "iris"), "loss_drop"] == 0  # the base model is checkpoint 0
    assert "header" in truth.loc[(24, "iris"), "found_by"]
    assert (folder / "ground_truth.md").read_text().startswith("| checkpoint |")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("lab-minimal")
    runs = client.search_runs([experiment.experiment_id])
    # 3 checkpoints x 4 datasets x 4 tests (conf/test/lab_tests.yaml), a dataset verdict per
    # checkpoint and dataset, and the report run
    assert len(runs) == 48 + 12 + 1
    report = next(r for r in runs if r.data.tags.get("lab_report") == "minimal")
    assert report.data.metrics["ground_truth.iris.p24.loss_drop"] > 0
    tests = {"header", "row_completion", "first_token", "min_k_prob", "dataset"}
    assert set(table["test"]) == tests
    for test, part in table.groupby("test"):
        held = part[part["group"] == "held out"].iloc[0]
        assert held["detected"] == 0, test  # no test cries wolf on a file the model never read
