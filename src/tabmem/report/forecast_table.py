"""The forecasting table (Bordt et al. 2024, Table 1) from the tracked ``test=forecast`` runs.

Rows are series × periods: for each series and cutoff, one row with the smallest and largest
per-period error over the periods before the cutoff, then one row per period after it, then the
verdict. Columns are the models, and ``naive`` (next value = last value) as the baseline. Cells
hold robust mean relative errors in percent. Each run's per-period numbers come from its
``forecast_periods.json`` artifact; of several runs of one model, series and cutoff, the latest
counts. The naive forecast's error depends only on the days sampled, so each cell of ``naive``
comes from the latest run with that row (runs with other ``start`` / ``steps_per_period`` sample
other days: compare models run with the same settings).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tabmem.battery.forecast import PERIODS_TABLE
from tabmem.markdown import markdown_table

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

NAIVE = "naive"
VERDICT_ROW = "verdict"


def forecast_runs(client: Any, experiment_ids: Sequence[str]) -> list[Any]:
    """Finished ``test=forecast`` runs of the given experiments, newest first."""
    return client.search_runs(
        list(experiment_ids),
        filter_string="tags.test = 'forecast' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=5000,
    )


def read_periods(client: Any, run_id: str) -> pd.DataFrame:
    """A run's per-period table, as logged by ``test=forecast``."""
    with tempfile.TemporaryDirectory() as folder:
        path = client.download_artifacts(run_id, PERIODS_TABLE, folder)
        table = json.loads(Path(path).read_text())
    return pd.DataFrame(table["data"], columns=table["columns"])


def percent(value: float) -> str:
    """A fraction as a percentage with two decimals; empty for a missing value."""
    return "" if pd.isna(value) else f"{100 * value:.2f}%"


def percent_range(values: pd.Series) -> str:
    """``min–max`` of fractions as percentages, one number when they agree."""
    values = values.dropna()
    if values.empty:
        return ""
    low, high = percent(values.min()), percent(values.max())
    return low if low == high else f"{low.removesuffix('%')}–{high}"


def _cells(periods: pd.DataFrame, column: str) -> dict[str, str]:
    """Row label -> cell text for one run's table and one error column."""
    before = periods[periods["side"] == "before"]
    cells = {}
    if not before.empty:
        label = f"{before['period'].iloc[0]}–{before['period'].iloc[-1]} (min–max)"
        cells[label] = percent_range(before[column])
    for row in periods[periods["side"] != "before"].itertuples():
        suffix = " (spans cutoff)" if row.side == "spans" else ""
        cells[f"{row.period}{suffix}"] = percent(getattr(row, column))
    return cells


def _verdict(run: Any) -> str:
    p_value = run.data.metrics.get("p_value")
    verdict = run.data.tags.get("verdict", "")
    return verdict if p_value is None else f"{verdict} (p={p_value:.2g})"


def _row_order(key: tuple[str, str, str]) -> tuple[str, str, int, str]:
    """Before-cutoff range first, then the later periods in order, then the verdict."""
    series, cutoff, label = key
    kind = 0 if label.endswith("(min–max)") else 2 if label == VERDICT_ROW else 1
    return (series, cutoff, kind, label)


def forecast_table(client: Any, experiment_ids: Sequence[str]) -> pd.DataFrame:
    """Series × periods by model (plus the naive baseline): the paper's forecasting table.

    The index is (series, cutoff, period); cells are text, empty where a model has no value.
    """
    cells: dict[tuple[str, str, str], dict[str, str]] = {}
    for run in forecast_runs(client, experiment_ids):
        series, model = run.data.tags["dataset"], run.data.tags["model"]
        cutoff = run.data.params.get("test.cutoff", "None")
        if any(row.get(model) for (s, c, _), row in cells.items() if (s, c) == (series, cutoff)):
            continue  # an older run of a model already shown
        periods = read_periods(client, run.info.run_id)
        naive = _cells(periods, "naive_error")
        for label, text in _cells(periods, "model_error").items():
            row = cells.setdefault((series, cutoff, label), {})
            row[model] = text
            row.setdefault(NAIVE, naive[label])
        cells.setdefault((series, cutoff, VERDICT_ROW), {})[model] = _verdict(run)
    models = sorted({m for row in cells.values() for m in row} - {NAIVE})
    columns = [*models, NAIVE]
    keys = sorted(cells, key=_row_order)
    index = pd.MultiIndex.from_tuples(keys, names=["series", "cutoff", "period"])
    data = [[cells[k].get(c, "") for c in columns] for k in keys]
    return pd.DataFrame(data, index=index, columns=columns)


def to_markdown(table: pd.DataFrame) -> str:
    """The table as GitHub Markdown, without extra dependencies."""
    head = [*table.index.names, *table.columns]
    rows = [[*map(str, key), *row.astype(str)] for key, row in table.iterrows()]
    return markdown_table(head, rows) + "\n"
