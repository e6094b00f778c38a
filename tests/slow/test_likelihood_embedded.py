"""The likelihood suite on the embedded transformers models, for real (slow): smollm2 scored
against gemma3 (and against zlib, and by Min-K%++) on a file no model can have read, and on
its twin."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import run_tabmem
from mlflow.tracking import MlflowClient

# Two cells of four tests; gemma3's 262k-token vocabulary makes the reference slow on a CPU.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

TESTS = ("min_k_prob", "reference_ratio", "zlib_ratio", "min_k_plus_plus")
SMALL = [f"test.{t}.n_rows=20" for t in TESTS]


def runs_of(outputs: Path) -> list:
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("tabmem")
    return client.search_runs([experiment.experiment_id])


def test_smollm2_against_gemma3_finds_no_rows_of_a_file_nobody_read(tmp_path):
    done = run_tabmem(
        tmp_path,
        "-m",
        "model=smollm2-135m-hf",
        "dataset=synthetic-novel",
        "test=likelihood",
        "transform=original,twin",
        "hydra/launcher=basic",
        *SMALL,
        timeout=3000,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "8 finished, 0 skipped, 0 failed" in done.stdout
    runs = runs_of(tmp_path)
    tests = [r for r in runs if r.data.tags.get("scope") != "dataset"]
    assert sorted(r.data.tags["test"] for r in tests) == sorted(TESTS * 2)
    ratio = [r for r in tests if r.data.tags["test"] != "min_k_prob"]
    assert len(ratio) == 6
    for run in ratio:
        tags, metrics = run.data.tags, run.data.metrics
        assert tags["verdict"] in {"no_evidence", "ambiguous"}, tags["reason"]
        assert metrics["pairs_scored"] == 20 and 0 < metrics["p_value"] <= 1
        if tags["test"] == "reference_ratio":
            assert tags["info.reference_model"] == "gemma3-270m-hf"
            assert metrics["mean_ratio_real"] != 0
    verdicts = [r for r in runs if r.data.tags.get("scope") == "dataset"]
    assert sorted(r.data.tags["transform"] for r in verdicts) == ["original", "twin"]
    assert all(r.data.tags["verdict"] != "evidence" for r in verdicts)
