"""The probes on the embedded model, for real: iris on real, like and obfuscated data (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tabmem.report.probes_table import probes_tables
from tabmem.tracking.runs import load_runs

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
N = 6
VERDICTS = {"evidence", "no_evidence", "ambiguous", "not_applicable"}


def test_embedded_model_completes_the_probes_table(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            "model=smollm2-135m",
            "dataset=iris",
            "transform=original,like,obfuscated",
            "test=probes",
            f"test.completion_choice.n_queries={N}",
            f"test.existence.n_queries={N}",
            "hydra.launcher.n_jobs=1",
            f"outputs_dir={tmp_path}",
            "progress=false",
            "show_queries=false",
        ],
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "6 finished, 0 skipped, 0 failed" in result.stdout
    found = load_runs(f"sqlite:///{tmp_path / 'mlflow.db'}", ["tabmem"])
    runs = found[found["test"] != "dataset"]  # each model's two probes also join a dataset verdict
    assert len(runs) == 6 and (found["test"] == "dataset").sum() == 3
    for _, run in runs.iterrows():
        assert run["verdict"] in VERDICTS and run["suite"] == "probes"
        assert run["metric.n_queries"] == N and run["metric.model_calls"] == N
        assert 0 <= run["metric.n_hits"] <= N - run["metric.n_unparseable"]
        assert run["metric.baseline"] == pytest.approx(0.2)
    # the small model answers with letters often enough for the parser to read most answers
    assert runs["metric.n_unparseable"].sum() < 6 * N
    [table] = probes_tables(runs)
    assert table.name == "probes-smollm2-135m"
    row = table.frame.iloc[0]
    assert row["dataset"] == "iris" and all(row.iloc[1:] != "")
