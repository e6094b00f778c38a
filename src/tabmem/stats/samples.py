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
from scipy import stats

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


COPY_SPREADS = (1.0, 0.75, 0.5, 0.35, 0.25, 0.1, 0.0)
"""The spreads at which the copy null's copulas draw: the data's own, sharper ones, and none
(every stratum's median values). A sharper sampler writes fewer distinct rows but repeats
rows near the modes; which spread copies the most distinct real rows depends on the file
and on how many samples are drawn, so all are tried."""


@dataclass(frozen=True)
class CopyNull:
    """How many distinct real rows a model that knows the data's distribution and none of its
    rows writes among ``n`` samples, at its best: a panel of data-only samplers (independent
    marginal draws, and the data's Gaussian copulas at every ``COPY_SPREADS``), each simulated
    ``draws`` times, and each distinct real row's chance of being written by each of them.

    The statistic is *distinct* real rows, not copies: a sampler at zero spread writes its
    strata's median rows over and over, and on a small coarse-valued file one of them is a
    real row (iris: a third of its samples copy one row), so counting copies would let any
    sharp enough sampler beat the null without knowing a row. It cannot write many distinct
    rows without spreading, and spreading lowers each row's chance.
    """

    samplers: tuple[str, ...]
    chances: np.ndarray
    """samplers × distinct real rows: each row's estimated chance of being written once."""
    totals: np.ndarray
    """per sampler, the estimated chance that one sample copies some real row."""
    draws: int

    def expected(self, n: int) -> tuple[str, float]:
        """The sampler of the panel expecting the most distinct real rows among ``n`` samples,
        and that expectation. Each sampler's counts one unseen row's worth more than its
        draws showed, ``n / (draws + 1)``, so that a null estimated as empty is not exact."""
        if n <= 0 or not len(self.samplers):
            return "", 0.0
        means = (-np.expm1(n * np.log1p(-np.minimum(self.chances, 1 - 1e-12)))).sum(axis=1)
        best = int(np.argmax(means))
        return self.samplers[best], float(means[best]) + n / (self.draws + 1)

    def p_value(self, distinct: int, n: int) -> float:
        """P(at least ``distinct`` distinct real rows) for the panel's strongest sampler: the
        Poisson tail at its expectation. Distinct rows are a sum of indicators, each row
        written or not, and a Poisson variable's upper tail above its mean bounds that of any
        such sum with the same mean (Hoeffding 1956; Anderson & Samuels 1967), so the p-value
        errs on the safe side. Which sampler is strongest does not depend on ``distinct``:
        the Poisson tail grows with the mean."""
        if distinct <= 0:
            return 1.0
        return float(stats.poisson.sf(distinct - 1, self.expected(n)[1]))

    def copy_chance(self) -> float:
        """The panel's highest chance that one sample copies a real row."""
        return float(self.totals.max()) if len(self.totals) else 0.0

    @classmethod
    def fit(
        cls, rows: Sequence[Sequence[str]], table: CodedTable, draws: int, rng: random.Random
    ) -> CopyNull:
        """The panel on ``rows`` (raw fields) coded as ``table``, ``draws`` samples each."""
        patterns = np.unique(table.codes, axis=0)
        index = {tuple(p): i for i, p in enumerate(patterns.tolist())}
        generator = np.random.default_rng(rng.randrange(2**32))
        simulated = {"marginal": _marginal_codes(table, draws, generator)}
        if rows:
            model = TableModel.fit(rows)
            for spread in COPY_SPREADS:
                simulated[f"copula@{spread:g}"] = _copula_codes(
                    model, table, draws, spread, generator
                )
        chances = np.zeros((len(simulated), len(patterns)))
        for k, codes in enumerate(simulated.values()):
            hits = [index.get(row) for row in map(tuple, codes.tolist())]
            found = np.array([h for h in hits if h is not None], dtype=np.int64)
            chances[k] = np.bincount(found, minlength=len(patterns)) / draws
        return cls(tuple(simulated), chances, chances.sum(axis=1), draws)


def _marginal_codes(table: CodedTable, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` observations whose features are drawn independently from the data's columns."""
    picks = rng.integers(0, table.codes.shape[0], size=(draws, table.n_features))
    return table.codes[picks, np.arange(table.n_features)]


def _copula_codes(
    model: TableModel, table: CodedTable, draws: int, spread: float, rng: np.random.Generator
) -> np.ndarray:
    """``draws`` observations of the table model at ``spread``, as ``table``'s codes; a column
    the model does not model (a row counter) is drawn from its own values, as a sampler that
    knows the ids run from 1 to n but not which row holds which would write it."""
    out = _marginal_codes(table, draws, rng)
    counts = rng.multinomial(draws, model.shares)
    start = 0
    for copula, count in zip(model.copulas, counts.tolist(), strict=True):
        positions = copula.positions(count, rng, spread)
        for k, (j, marginal) in enumerate(zip(copula.modelled, copula.marginals, strict=True)):
            book = table.codebooks[j]
            codes = np.array([book.get(v, _ABSENT) for v in marginal.values], dtype=np.int64)
            out[start : start + count, j] = codes[positions[:, k]]
        start += count
    return out


def known_value_share(table: CodedTable, values: Mapping[int, Sequence[str]]) -> dict[int, float]:
    """Per column index, the share of the given sampled values that occur in that column."""
    shares = {}
    for column, sampled in values.items():
        if sampled:
            book = table.codebooks[column]
            shares[column] = sum(normalize_value(v) in book for v in sampled) / len(sampled)
    return shares
