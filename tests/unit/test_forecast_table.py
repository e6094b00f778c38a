"""The forecasting table (series × periods by model, naive baseline) from a small MLflow store."""

import pandas as pd
import pytest

from tabmem.battery.forecast import PERIODS_TABLE
from tabmem.report.forecast_table import (
    forecast_table,
    percent_range,
    to_markdown,
)
from tabmem.tracking.store import TrackingStore, default_tracking_uri


def periods(model_errors: list[float], sides: list[str]) -> pd.DataFrame:
    labels = [str(2010 + k) for k in range(len(sides))]
    return pd.DataFrame(
        {
            "period": labels,
            "side": sides,
            "model_error": model_errors,
            "naive_error": [0.01 + 0.001 * k for k in range(len(sides))],
        }
    )


def log(store: TrackingStore, model: str, errors: list[float], verdict: str, cutoff: str) -> None:
    sides = ["before", "before", "before", "after", "after"]
    store.log_cell(
        f"{model} | wti-oil | forecast | original",
        {"model": model, "dataset": "wti-oil", "test": "forecast", "verdict": verdict},
        {"test.name": "forecast", "test.cutoff": cutoff},
        {"p_value": 0.0001 if verdict == "evidence" else 0.6},
        {PERIODS_TABLE: periods(errors, sides)},
        {},
        failed=False,
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> pd.DataFrame:
    outputs = tmp_path_factory.mktemp("outputs")
    store = TrackingStore(
        uri=default_tracking_uri(outputs),
        artifact_root=outputs / "mlartifacts",
        experiment="forecast-table",
        lock_path=outputs / "mlflow.lock",
    )
    log(store, "oracle-null", [0.02] * 5, "no_evidence", "2013-01-01")
    log(store, "oracle-memorizer", [0.5, 0.5, 0.5, 0.5, 0.5], "no_evidence", "2013-01-01")
    log(store, "oracle-memorizer", [0.0, 0.001, 0.0005, 0.02, 0.019], "evidence", "2013-01-01")
    return forecast_table(store.client, [store.experiment_id])


def test_rows_are_series_by_periods_and_columns_models_then_naive(table):
    assert table.columns.tolist() == ["oracle-memorizer", "oracle-null", "naive"]
    assert table.index.get_level_values("period").tolist() == [
        "2010–2012 (min–max)",
        "2013",
        "2014",
        "verdict",
    ]
    assert set(table.index.get_level_values("series")) == {"wti-oil"}


def test_cells_hold_percentages_from_the_latest_run(table):
    key = ("wti-oil", "2013-01-01")
    assert table.loc[(*key, "2010–2012 (min–max)"), "oracle-memorizer"] == "0.00–0.10%"
    assert table.loc[(*key, "2014"), "oracle-memorizer"] == "1.90%"
    assert table.loc[(*key, "2010–2012 (min–max)"), "oracle-null"] == "2.00%"
    assert table.loc[(*key, "2010–2012 (min–max)"), "naive"] == "1.00–1.20%"
    assert table.loc[(*key, "2013"), "naive"] == "1.30%"
    assert table.loc[(*key, "verdict"), "oracle-memorizer"] == "evidence (p=0.0001)"
    assert table.loc[(*key, "verdict"), "naive"] == ""


def test_markdown_has_one_line_per_row(table):
    text = to_markdown(table)
    assert text.count("\n") == 2 + len(table)
    assert text.splitlines()[0].startswith("| series | cutoff | period | oracle-memorizer")


def test_percent_range_collapses_equal_ends_and_skips_missing():
    assert percent_range(pd.Series([0.02, 0.02])) == "2.00%"
    assert percent_range(pd.Series([float("nan")])) == ""
