"""test=forecast on the embedded model, for real: a small grid on the shipped WTI series (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tabmem.report.forecast_table import forecast_table

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
SETTINGS = [
    "test.cutoff=2015-01-01",
    "test.start=2013-01-01",
    "test.end=2016-12-31",
    "test.steps_per_period=3",
    "test.min_steps=3",
]


def test_embedded_model_completes_the_forecast_table(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "run.py",
            "model=smollm2-135m",
            "dataset=wti-oil",
            "test=forecast",
            *SETTINGS,
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
    assert "1 finished, 0 skipped, 0 failed" in result.stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("tabmem")
    [run] = client.search_runs([experiment.experiment_id])
    assert run.data.tags["verdict"] in {"evidence", "no_evidence", "ambiguous", "not_applicable"}
    assert run.data.metrics["n_queries"] == 12  # 4 years x 3 sampled days
    assert run.data.metrics["model_calls"] == 12
    parsed = run.data.metrics["n_scored"] + run.data.metrics["n_unparseable"]
    assert parsed + run.data.metrics["n_failed_queries"] == 12
    path = client.download_artifacts(run.info.run_id, "forecast_periods.json", str(tmp_path))
    periods = json.loads(Path(path).read_text())
    assert [row[0] for row in periods["data"]] == ["2013", "2014", "2015", "2016"]
    table = forecast_table(client, [experiment.experiment_id])
    assert table.columns.tolist() == ["smollm2-135m", "naive"]
    assert table.index.get_level_values("period").tolist() == [
        "2013–2014 (min–max)",
        "2015",
        "2016",
        "verdict",
    ]
