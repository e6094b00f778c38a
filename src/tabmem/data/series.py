"""A time series view of a dataset: a CSV of dates and values, one step per row, in time order.

A ``kind: series`` dataset is an ordinary CSV file (``date,value``, or more columns with
``date_column`` / ``value_column`` naming the two to use). The view keeps each date and value
exactly as the file writes it, for prompts, and parses them, for scoring. Rows whose value is
not a number (a holiday written as ``.``, an empty cell) are left out and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tabmem.data.csvtext import parse_fields
from tabmem.data.dataset import Dataset
from tabmem.errors import DatasetError


@dataclass(frozen=True, eq=False)
class Series:
    """Dates and values of one series, oldest first, with the file's own spelling of each."""

    name: str
    date_name: str
    value_name: str
    date_text: tuple[str, ...]
    value_text: tuple[str, ...]
    values: np.ndarray
    dates: pd.DatetimeIndex
    dropped_rows: int = 0

    def __len__(self) -> int:
        return len(self.values)


def _column(names: list[str], wanted: object, default: int, dataset: Dataset) -> int:
    """The index of the column the config names, else the ``default``-th column."""
    if wanted is None:
        if default >= len(names):
            raise DatasetError(
                f"Dataset '{dataset.name}' has {len(names)} column(s); a series needs a date "
                "column and a value column."
            )
        return default
    stripped = [n.strip() for n in names]
    if str(wanted) not in stripped:
        raise DatasetError(
            f"Dataset '{dataset.name}' has no column '{wanted}'; its columns are "
            f"{', '.join(stripped)}."
        )
    return stripped.index(str(wanted))


def _parse_dates(texts: list[str], name: str) -> pd.DatetimeIndex:
    try:
        return pd.DatetimeIndex(pd.to_datetime(pd.Series(texts)))
    except (ValueError, TypeError) as exc:
        raise DatasetError(
            f"Dataset '{name}': its date column holds text that is not a date ({exc})."
        ) from exc


def series_view(dataset: Dataset) -> Series:
    """The dataset as a series, or a one-sentence error saying what is wrong with the file."""
    extra = dataset.spec.extra
    names = dataset.feature_names
    date_col = _column(names, extra.get("date_column"), 0, dataset)
    value_col = _column(names, extra.get("value_column"), 1, dataset)
    date_text, value_text, values = [], [], []
    for row in dataset.rows:
        fields = [f.strip() for f in parse_fields(row, dataset.delimiter)]
        number = pd.to_numeric(fields[value_col], errors="coerce")
        if not np.isfinite(number):
            continue
        date_text.append(fields[date_col])
        value_text.append(fields[value_col])
        values.append(float(number))
    dates = _parse_dates(date_text, dataset.name)
    if not (dates.is_monotonic_increasing and dates.is_unique):
        raise DatasetError(
            f"Dataset '{dataset.name}': the dates must increase from row to row, each date once; "
            "sort the file by date."
        )
    return Series(
        name=dataset.name,
        date_name=names[date_col].strip(),
        value_name=names[value_col].strip(),
        date_text=tuple(date_text),
        value_text=tuple(value_text),
        values=np.asarray(values, dtype=float),
        dates=dates,
        dropped_rows=len(dataset.rows) - len(values),
    )
