"""A Gaussian copula over a table's raw fields: a data-only model of the file's values and the
dependence between its columns (the blind checks' copula rule, ``tabmem.data.copula_conditional``;
the sample test's copy null, ``tabmem.stats.samples``; ``oracle-copula``).

Each column keeps its empirical distribution: the file's distinct values (compared normalized,
so ``3`` and ``3.0`` are one value) in an order, each owning a slice of (0, 1) as wide as its
share of the rows. Numbers are ordered by size, missing values first. Categories are ordered by
the mean score of the column they tell most about (``Education`` by ``EducationNum``,
``Relationship`` by ``Gender``), so that the dependence becomes a correlation the copula keeps;
with no such column, by frequency.
A row's normal scores are the inverse normal of its values' slice middles (the middle, not a
random point, so that two columns that determine each other correlate fully); their
correlation matrix carries the dependence between columns. A draw of correlated normal scores
maps back to the value whose slice holds each.

Dependence that differs between groups of rows (iris' species, adult's relationship) is more
than one correlation matrix can hold, so ``TableModel`` fits one copula per value of a hub
column, the category with at most ``MAX_STRATA`` values that tells most about the others.
A column that counts rows (each value the one before plus one, an id) is not modelled.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri  # the normal cdf and ppf (scipy.stats: a second to import)

from tabmem.data.association import coarse_codes, information_share
from tabmem.data.values import finite_number, normalize_value
from tabmem.kept import Kept

SHRINKAGE = 1e-3
"""Weight of the identity mixed into the correlation matrix, so it is always positive definite."""
MAX_STRATA = 10
"""A hub column has at most this many distinct values."""
MIN_STRATUM = 30
"""Hub values with fewer rows share one pooled copula."""
FITS_KEPT = 8
"""Table models kept per process, by their rows' content: a file's model is fitted once, not
once per cell that asks for it (the sample test's baseline, twins, conditionals)."""


def is_numeric(values: Iterable[str]) -> bool:
    """Whether every non-empty (normalized) value is a number."""
    return all(finite_number(v) is not None for v in values if v != "")


def category_ranks(
    values: Sequence[str], target: int, coded: Sequence[np.ndarray], scores: np.ndarray
) -> dict[str, float] | None:
    """An order for a categorical column's values (normalized): the mean, within each category,
    of the normal scores of the column it tells most about (``coded``: every modelled column's
    coarse codes; ``target``: this column's place among them). None when it tells about none."""
    shares = [
        information_share(coded[target], other) if k != target else -1.0
        for k, other in enumerate(coded)
    ]
    partner = int(np.argmax(shares))
    if shares[partner] <= 0.0:
        return None
    grouped: dict[str, list[float]] = defaultdict(list)
    for category, score in zip(values, scores[:, partner], strict=True):
        grouped[category].append(float(score))
    return {c: float(np.mean(v)) for c, v in grouped.items()}


def _middle_scores(
    columns: Sequence[Sequence[str]], modelled: Sequence[int], marginals: Sequence[Marginal]
) -> np.ndarray:
    """Each row's normal score per modelled column: the inverse normal of its slice middle."""
    scores = np.empty((len(columns[0]), len(modelled)))
    for k, (j, marginal) in enumerate(zip(modelled, marginals, strict=True)):
        position = marginal.index(columns[j])
        middle = (marginal.edges[position] + marginal.edges[position + 1]) / 2
        scores[:, k] = ndtri(middle)
    return scores


def is_counter(values: Sequence[str]) -> bool:
    """Whether a column counts rows: whole numbers, each the one before plus one."""
    if len(values) < 2:
        return False
    numbers = [v.strip() for v in values]
    if not all(n.isdigit() for n in numbers):
        return False
    return all(int(b) - int(a) == 1 for a, b in itertools.pairwise(numbers))


def counter_split(rows: Sequence[Sequence[str]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The columns of ``rows`` that count rows, and the others: those a model of the table
    draws."""
    width = len(rows[0])
    counters = tuple(j for j in range(width) if is_counter([row[j] for row in rows]))
    return counters, tuple(j for j in range(width) if j not in counters)


@dataclass(frozen=True)
class Marginal:
    """One column's distinct values in copula order and their slice edges."""

    values: tuple[str, ...]
    edges: np.ndarray

    @classmethod
    def fit(cls, raw: Sequence[str], rank: dict[str, float] | None = None) -> Marginal:
        """The marginal of one column of raw fields; ``rank`` orders a categorical column's
        values (default: by frequency)."""
        counts = Counter(normalize_value(v) for v in raw)
        numeric = is_numeric(counts)

        def order(value: str) -> tuple:
            if numeric:
                return (value != "", finite_number(value) or 0.0)
            if rank:
                return (rank.get(value, 0.0), -counts[value], value)
            return (-counts[value], value)

        values = tuple(sorted(counts, key=order))
        shares = np.array([counts[v] for v in values], dtype=float) / len(raw)
        edges = np.concatenate([[0.0], np.cumsum(shares)])
        edges[-1] = 1.0
        return cls(values, edges)

    def index(self, raw: Sequence[str]) -> np.ndarray:
        """The position in ``values`` of each raw field."""
        where = {v: i for i, v in enumerate(self.values)}
        return np.array([where[normalize_value(v)] for v in raw], dtype=np.int64)


@dataclass(frozen=True)
class GaussianCopula:
    """Fitted marginals of the modelled columns and their correlation."""

    width: int
    modelled: tuple[int, ...]
    marginals: tuple[Marginal, ...]
    correlation: np.ndarray

    @classmethod
    def fit(cls, rows: Sequence[Sequence[str]], modelled: Sequence[int]) -> GaussianCopula:
        """Fit the ``modelled`` columns of rows of raw fields."""
        if not rows:
            raise ValueError("a copula needs at least one row to fit")
        modelled = tuple(modelled)
        columns = [[row[j] for row in rows] for j in range(len(rows[0]))]
        normalized = [[normalize_value(v) for v in columns[j]] for j in modelled]
        first = [Marginal.fit(columns[j]) for j in modelled]
        scores = _middle_scores(columns, modelled, first)
        coded = [coarse_codes(values) for values in normalized]
        marginals = tuple(
            marginal
            if is_numeric(normalized[k])
            else Marginal.fit(columns[j], category_ranks(normalized[k], k, coded, scores))
            for k, (j, marginal) in enumerate(zip(modelled, first, strict=True))
        )
        scores = _middle_scores(columns, modelled, marginals)
        correlation = np.eye(len(modelled))
        if len(rows) > 2 and len(modelled) > 1:
            with np.errstate(invalid="ignore", divide="ignore"):
                correlation = np.nan_to_num(np.corrcoef(scores, rowvar=False))
            np.fill_diagonal(correlation, 1.0)
        correlation = (1 - SHRINKAGE) * correlation + SHRINKAGE * np.eye(len(modelled))
        return cls(len(columns), modelled, marginals, correlation)

    def positions(self, n: int, rng: np.random.Generator, spread: float = 1.0) -> np.ndarray:
        """``n`` draws as each modelled column's value position (n × modelled columns).
        ``spread`` scales the normal scores: 1 draws at the data's own spread, below 1 nearer
        each column's median slice, 0 always the median slices (a sharper sampler)."""
        latent = rng.multivariate_normal(np.zeros(len(self.modelled)), self.correlation, n)
        uniform = ndtr(spread * latent).reshape(n, len(self.modelled))
        out = np.empty((n, len(self.modelled)), dtype=np.int64)
        for k, marginal in enumerate(self.marginals):
            positions = np.searchsorted(marginal.edges, uniform[:, k], side="right") - 1
            out[:, k] = np.clip(positions, 0, len(marginal.values) - 1)
        return out


def hub_column(
    rows: Sequence[Sequence[str]], candidates: Sequence[int], hubs: Sequence[int] | None = None
) -> int | None:
    """The column with at most ``MAX_STRATA`` values that tells most about the other
    ``candidates``, or None; only ``hubs`` may be it (default: any candidate)."""
    normalized = {j: [normalize_value(row[j]) for row in rows] for j in candidates}
    coded = {j: coarse_codes(values) for j, values in normalized.items()}
    best, best_share = None, 0.0
    for j in candidates if hubs is None else hubs:
        if len(set(normalized[j])) > MAX_STRATA:
            continue
        share = sum(information_share(coded[j], coded[i]) for i in candidates if i != j)
        if share > best_share:
            best, best_share = j, share
    return best


@dataclass(frozen=True)
class TableModel:
    """A table's model: one Gaussian copula per value of a hub column (the category that tells
    most about the others, such as iris' species), so that what differs between groups of rows
    is kept; counter columns are not modelled."""

    width: int
    counters: tuple[int, ...]
    hub: int | None
    strata: tuple[tuple[str, ...], ...]
    shares: np.ndarray
    copulas: tuple[GaussianCopula, ...]

    @classmethod
    def fit(cls, rows: Sequence[Sequence[str]]) -> TableModel:
        """Fit to rows of raw fields (one list of field texts per row); the same rows give the
        same (immutable) model, kept from an earlier fit."""
        if not rows:
            raise ValueError("a table model needs at least one row to fit")
        return _FITTED.get(table_fingerprint(rows), lambda: cls._fit(rows))

    @classmethod
    def _fit(cls, rows: Sequence[Sequence[str]]) -> TableModel:
        width = len(rows[0])
        counters, modelled = counter_split(rows)
        hub = hub_column(rows, modelled) if len(rows) >= 2 * MIN_STRATUM else None
        groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, row in enumerate(rows):
            groups[(normalize_value(row[hub]),) if hub is not None else ()].append(i)
        small = [key for key, members in groups.items() if len(members) < MIN_STRATUM]
        if small and len(groups) > len(small):
            pooled = [i for key in small for i in groups.pop(key)]
            groups[tuple(sorted(k[0] for k in small))] = pooled
        strata = tuple(sorted(groups))
        sizes = np.array([len(groups[key]) for key in strata], dtype=float)
        copulas = tuple(
            GaussianCopula.fit([rows[i] for i in groups[key]], modelled) for key in strata
        )
        return cls(width, counters, hub, strata, sizes / sizes.sum(), copulas)

    @property
    def modelled(self) -> tuple[int, ...]:
        return tuple(j for j in range(self.width) if j not in self.counters)


_FITTED: Kept[TableModel] = Kept(FITS_KEPT)


def table_fingerprint(rows: Sequence[Sequence[str]]) -> bytes:
    """A digest of rows of fields, separators included (so no two tables share one)."""
    digest = hashlib.blake2b(digest_size=16)
    for row in rows:
        digest.update("\x1f".join(row).encode())
        digest.update(b"\x1e")
    return digest.digest()
