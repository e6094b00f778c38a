"""A dataset's twin (``transform=twin``): the same table as far as a model of it can tell, but
rows that no model can have seen.

The twin keeps the file's header, column order, delimiter, line ends, quoting, missing-value
markers, number formats, the values of every column and (drawn column after column by trees,
``tabmem.data.synthesis``) the dependence between columns, and has as many rows. Its rows are new
draws: none agrees with a real row on every column that is not a row counter. Any ``evidence``
of having seen the *rows* of a twin is therefore a false positive, whoever the model is.
The twin is a function of the file and the seed; the fitted model and the twin's sha256 are
kept in the dataset's ``extra["twin"]`` for the run's record.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from tabmem.data.dataset import Dataset
from tabmem.data.population import placed_rows
from tabmem.data.table import RawTable
from tabmem.data.values import normalize_value
from tabmem.errors import DatasetError

if TYPE_CHECKING:
    from tabmem.data.synthesis import RowSynthesis

MAX_DRAWS_PER_ROW = 50
"""Give up when this many draws per row still leave the twin short of new rows."""


def twin_rng(seed: int, dataset: str) -> np.random.Generator:
    """The twin's random stream: the same seed and dataset give the same twin."""
    return np.random.default_rng([seed, zlib.crc32(dataset.encode("utf-8")), zlib.crc32(b"twin")])


def _key(row: tuple[str, ...] | list[str], columns: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(normalize_value(row[j]) for j in columns)


def twin_rows(
    table: RawTable, rng: np.random.Generator, fitted_on: Sequence[Sequence[str]] = ()
) -> tuple[list[list[str]], RowSynthesis]:
    """As many new rows as ``table`` has, drawn from a model of the rows ``fitted_on`` (the
    table's own where none are given), none equal to one of those outside counter columns."""
    from tabmem.data.synthesis import RowSynthesis  # sklearn, scipy: seconds, for twins alone

    fitted_on = fitted_on or table.rows
    model = RowSynthesis.fit(fitted_on)
    modelled = model.modelled
    real = {_key(row, modelled) for row in fitted_on}
    n = len(table.rows)
    kept: list[list[str]] = []
    drawn = 0
    while len(kept) < n:
        if drawn >= MAX_DRAWS_PER_ROW * n:
            raise DatasetError(
                f"Could not draw a twin: after {drawn} draws only {len(kept)} of {n} rows "
                "differ from every real row (the table has too few distinct rows)."
            )
        batch = model.sample(max(16, 2 * (n - len(kept))), rng)
        drawn += len(batch)
        kept.extend(row for row in batch if _key(row, modelled) not in real)
    rows = kept[:n]
    for j in model.counters:
        start = int(table.rows[0][j].strip())
        for i, row in enumerate(rows):
            row[j] = str(start + i)
    return rows, model


def twin_of(dataset: Dataset, seed: int) -> Dataset:
    """The dataset's twin for ``seed``, under the dataset's name (models are told it is the
    dataset they may know: the hardest case for a test of rows seen)."""
    if dataset.spec.kind == "series":
        raise DatasetError(
            f"Dataset '{dataset.name}' is a time series: a twin draws rows independently, "
            "which would lose the order the series tests read; use a tabular dataset."
        )
    table = RawTable.from_dataset(dataset)
    if not table.rows:
        raise DatasetError(f"Dataset '{dataset.name}' has no data rows to draw a twin from.")
    placed = placed_rows(dataset, lambda d: RawTable.from_dataset(d).rows)
    rows, model = twin_rows(table, twin_rng(seed, dataset.name), placed[0] if placed else ())
    text = replace(table, rows=tuple(tuple(r) for r in rows)).to_text()
    if not dataset.text.endswith(("\n", "\r")):
        text = text.removesuffix(dataset.newline)
    record = {
        **model.describe(),
        "seed": seed,
        "rows": len(rows),
        **({"population": dataset.spec.population} if dataset.spec.population else {}),
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "source_sha256": hashlib.sha256(dataset.text.encode("utf-8")).hexdigest(),
    }
    extra = {**dataset.spec.extra, "transform": "twin", "twin": record}
    spec = replace(dataset.spec, extra=extra, population=None)  # its rows are no table's
    return Dataset(spec=spec, path=dataset.path, text=text)


def twin_info(dataset: Dataset) -> dict[str, object]:
    """What a run records of a twin: its sha256 (a tag) and the fitted model (result.yaml);
    nothing for a dataset that is no twin."""
    record = dataset.spec.extra.get("twin")
    if not record:
        return {}
    return {"twin_sha256": record["sha256"], "twin_model": record}
