"""How close sampled observations are to the real data: copies, best matches, known values.

Values are compared after ``normalize_value``: surrounding whitespace and quotes removed, the
usual spellings of a missing value made empty, and numbers compared by value (``5`` equals
``5.0``, ``.28`` equals ``0.28``), so a copy written with another number format still counts.
Rows are compared as integer codes per column, which keeps the closest-row search over tens of
thousands of rows fast.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tabmem.data import Dataset
from tabmem.data.copula import TableModel
from tabmem.data.values import normalize_value

_ABSENT = -1
"""The code of a sampled value that never occurs in its column."""


def data_values(dataset: Dataset) -> list[list[str]]:
    """Every data row as a list of values: fields unquoted and stripped, exact text otherwise."""
    reader = csv.reader(io.StringIO(dataset.text), delimiter=dataset.delimiter)
    rows = [row for row in reader if row]
    return [[field.strip() for field in row] for row in rows[1:]]


@dataclass
class CodedTable:
    """The data as integer codes per column, and the codebook that maps normalized values."""

    codes: np.ndarray
    codebooks: list[dict[str, int]]

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[str]]) -> CodedTable:
        width = len(rows[0]) if rows else 0
        codebooks: list[dict[str, int]] = [{} for _ in range(width)]
        codes = np.empty((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            for j, value in enumerate(row):
                book = codebooks[j]
                codes[i, j] = book.setdefault(normalize_value(value), len(book))
        return cls(codes=codes, codebooks=codebooks)

    def encode(self, values: Sequence[str]) -> np.ndarray:
        """One observation as codes; a value absent from its column gets a code that never
        matches."""
        return np.array(
            [
                book.get(normalize_value(v), _ABSENT)
                for v, book in zip(values, self.codebooks, strict=True)
            ],
            dtype=np.int64,
        )

    @property
    def n_features(self) -> int:
        return self.codes.shape[1]

    @cached_property
    def _by_column(self) -> tuple[np.ndarray, ...]:
        """Each column's codes, contiguous: a comparison walks one column at a time."""
        return tuple(np.ascontiguousarray(self.codes[:, j]) for j in range(self.n_features))

    def shared_features(self, codes: np.ndarray) -> np.ndarray:
        """Per real row, how many features it shares with the observation ``codes``."""
        shared = np.zeros(self.codes.shape[0], dtype=np.int32)
        for column, code in zip(self._by_column, codes.tolist(), strict=True):
            shared += column == code
        return shared


def best_matches(table: CodedTable, samples: np.ndarray) -> np.ndarray:
    """For each sample (a row of codes), the most features it shares with any one real row;
    a sample drawn several times is compared once."""
    if len(samples) == 0:
        return np.zeros(0, dtype=np.int64)
    distinct, inverse = np.unique(samples, axis=0, return_inverse=True)
    best = np.array([int(table.shared_features(s).max()) for s in distinct], dtype=np.int64)
    return best[inverse.reshape(-1)]


def real_row_best_matches(table: CodedTable, rows: Sequence[int]) -> np.ndarray:
    """For each given real row, the most features it shares with any *other* real row."""
    out = []
    for index in rows:
        shared = table.shared_features(table.codes[index])
        shared[index] = -1
        out.append(int(shared.max()) if len(shared) > 1 else 0)
    return np.array(out, dtype=np.int64)


def copy_chance(table: CodedTable, draws: int, rng: random.Random) -> float:
    """The chance that an observation whose features are drawn independently from the data's
    marginal distributions equals a real row, estimated by ``draws`` simulated observations.

    The estimate is (hits + 1) / (draws + 1): never zero, so a copy is never infinitely unlikely.
    """
    n_rows = table.codes.shape[0]
    generator = np.random.default_rng(rng.randrange(2**32))
    picks = generator.integers(0, n_rows, size=(draws, table.n_features))
    simulated = table.codes[picks, np.arange(table.n_features)]
    real = {tuple(row) for row in table.codes.tolist()}
    hits = sum(tuple(row) in real for row in simulated.tolist())
    return (hits + 1) / (draws + 1)


def joint_copy_chance(
    rows: Sequence[Sequence[str]], table: CodedTable, draws: int, rng: random.Random
) -> float:
    """The chance that an observation drawn from a model of the data's joint distribution (the
    twins' Gaussian copulas, ``tabmem.data.copula``, which keep each column's values and their
    dependence but store no row) equals a real row: what a model that knows the distribution
    and none of the rows copies by chance. On a small file of coarse values (iris) that is far
    above the independent draws' chance. Estimated as (hits + 1) / (draws + 1)."""
    if not rows:
        return 1.0 / (draws + 1)
    model = TableModel.fit(rows)
    sampled = model.sample(draws, np.random.default_rng(rng.randrange(2**32)))
    real = {tuple(row) for row in table.codes.tolist()}
    hits = sum(tuple(table.encode(row).tolist()) in real for row in sampled)
    return (hits + 1) / (draws + 1)


def known_value_share(table: CodedTable, values: Mapping[int, Sequence[str]]) -> dict[int, float]:
    """Per column index, the share of the given sampled values that occur in that column."""
    shares = {}
    for column, sampled in values.items():
        if sampled:
            book = table.codebooks[column]
            shares[column] = sum(normalize_value(v) in book for v in sampled) / len(sampled)
    return shares
