"""How unique a file's values and rows are: the context the paper prints beside its tests.

Values are the file's text fields with surrounding whitespace and quotes removed, so
``" State-gov"`` and ``State-gov`` are one value, while ``3`` and ``3.0`` stay two.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from tabmem.data import Dataset


def text_columns(dataset: Dataset) -> dict[str, list[str]]:
    """Every feature's values as text, one entry per data row, in file order (fresh lists of
    the file's parse, which is kept: every test of a cell and every model's few-shot examples
    ask for it)."""
    return {name: list(values) for name, values in _parsed_columns(dataset)}


@lru_cache(maxsize=8)
def _parsed_columns(dataset: Dataset) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The file parsed once per process: each feature's name and values, stripped."""
    names = [name.strip() for name in dataset.feature_names]
    # each record parsed alone: joined, a blank record would be skipped and shift the rest
    rows = [
        next(csv.reader(io.StringIO(row), delimiter=dataset.delimiter), []) for row in dataset.rows
    ]
    return tuple(
        (name, tuple(row[j].strip() if j < len(row) else "" for row in rows))
        for j, name in enumerate(names)
    )


def unique_fraction(values: Sequence[str]) -> float:
    """Distinct values / values: 1.0 when no two rows share a value."""
    return len(set(values)) / len(values) if values else 0.0


def duplicate_row_fraction(rows: Sequence[str]) -> float:
    """Share of rows that repeat an earlier row of the file exactly."""
    return 1.0 - len(set(rows)) / len(rows) if rows else 0.0


def is_row_id(values: Sequence[str]) -> bool:
    """Whether a column numbers the rows: distinct integers in increasing or decreasing order."""
    try:
        numbers = [int(v) for v in values]
    except ValueError:
        return False
    if len(numbers) < 2 or len(set(numbers)) < len(numbers):
        return False
    steps = [b - a for a, b in itertools.pairwise(numbers)]
    return all(s > 0 for s in steps) or all(s < 0 for s in steps)


@dataclass(frozen=True)
class UniqueFeature:
    """The feature a feature completion test asks for, and its fraction of distinct values."""

    name: str
    unique_fraction: float


def most_unique_feature(columns: dict[str, list[str]]) -> UniqueFeature | None:
    """The feature with the most distinct values per row, row ids excluded.

    Ties go to the feature with the longer values (a name before a number), then to the
    earlier column. None when every feature is a row id.
    """
    candidates = [
        (unique_fraction(values), sum(map(len, values)) / max(len(values), 1), -index, name)
        for index, (name, values) in enumerate(columns.items())
        if not is_row_id(values)
    ]
    if not candidates:
        return None
    fraction, _, _, name = max(candidates)
    return UniqueFeature(name, fraction)
