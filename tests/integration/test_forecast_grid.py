"""A real Hydra sweep of test=forecast over the reference models on the shipped WTI series.

The oracles know the series up to 2014-12-31 (its config's oracle_knows_until): the memorizer
must forecast the years before the cutoff almost exactly and get `evidence`; the null model,
which knows nothing, must not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import ONE_PROCESS, run_here
from mlflow.tracking import MlflowClient

from tabmem.report.forecast_table import forecast_table

GRID = [
    "-m",
    "model=oracle-memorizer,oracle-null",
    "dataset=wti-oil",
    "test=forecast",
    "test.cutoff=2015-01-01",
    "test.start=2012-01-01",
    "test.end=2017-12-31",
    "test.steps_per_period=12",
]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    result = run_here(outputs, *GRID, ONE_PROCESS, "experiment=forecast-test")
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("forecast-test")
    runs = client.search_runs([experiment.experiment_id])
    return outputs, client, experiment, {r.data.tags["model"]: r for r in runs}, result


def test_memorizer_is_evidence_with_near_zero_error_and_null_is_not(swept):
    _, _, _, runs, result = swept
    assert "2 finished, 0 skipped, 0 failed" in result.stdout
    memorizer, null = runs["oracle-memorizer"], runs["oracle-null"]
    assert memorizer.data.tags["verdict"] == "evidence", memorizer.data.tags["reason"]
    assert memorizer.data.metrics["model_error_before"] == 0.0
    assert memorizer.data.metrics["model_error_after"] > 0.015
    assert memorizer.data.metrics["p_value"] < 0.01
    assert null.data.tags["verdict"] == "no_evidence", null.data.tags["reason"]
    for run in (memorizer, null):
        assert run.info.status == "FINISHED"
        assert run.data.metrics["n_queries"] == 72  # 6 years x 12 sampled days
        assert run.data.metrics["n_failed_queries"] == 0
    assert null.data.metrics["n_unparseable"] > 0  # made-up words are counted apart


def test_periods_table_and_queries_are_logged(swept):
    outputs, client, _, runs, _ = swept
    run_id = runs["oracle-memorizer"].info.run_id
    names = {a.path for a in client.list_artifacts(run_id)}
    assert {"forecast_periods.json", "forecast_errors.png", "queries.json"} <= names
    path = client.download_artifacts(run_id, "queries.json", str(outputs / "dl"))
    table = json.loads(Path(path).read_text())
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    before = [r for r in rows if r["side"] == "before"]
    assert all(r["completion"] == r["expected"] for r in before)
    assert rows[0]["prompt"].count("[assistant]") == 20


def test_paper_table_layout_from_the_sweep(swept):
    _, client, experiment, _, _ = swept
    table = forecast_table(client, [experiment.experiment_id])
    assert table.columns.tolist() == ["oracle-memorizer", "oracle-null", "naive"]
    periods = table.index.get_level_values("period").tolist()
    assert periods == ["2012–2014 (min–max)", "2015", "2016", "2017", "verdict"]
    assert table.iloc[0]["oracle-memorizer"] == "0.00%"
    assert table.iloc[1]["oracle-null"] == "2.00%"
