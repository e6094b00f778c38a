"""A table's conditional distributions under its Gaussian copulas (``tabmem.data.copula``): what
a model that learnt the file's distribution, and read none of the rows it is asked about, would
answer. It shares nothing with the nearest-neighbour model (``tabmem.stats.neighbours``) that
builds the data-only baselines, so it is a hard negative of another model family.

The file is fitted once with ``TableModel`` (one copula per stratum of the hub column, counter
columns apart). A value is known through its slice of (0, 1) in its stratum's marginal and the
normal score of that slice's middle, as in the fit. Given some values of a row, the latent
Gaussian of a stratum is conditioned on their scores (a value absent from the stratum: a
number by its interpolated place among the stratum's numbers, a category not at all), and the
strata are weighted by their share times the likelihood of the given values (chain rule over
the slice probabilities); a given hub value picks its stratum. The asked column's distribution
is the mixture of the strata's slice probabilities. Its most likely value is the slice holding
the conditional median for a measurement (a number column with more than ``DISCRETE_VALUES``
values), else the most probable slice.

Rows asked about are left out (``left_out``) honestly and cheaply: each stratum holding some of
them gets a view whose value counts (so slice edges) and correlation (of the fit's scores of
the rows kept) are those of the stratum without those rows; a value
only they hold has a slice of width 0, so it is never answered, and its raw spellings count
only from the other rows. What such a view keeps of the full fit is second order: the order of
the categories and the other rows' scores (their slice middles move by the left-out rows'
share, a few in hundreds or thousands). Views are cached by the set of rows left out.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import logsumexp, ndtr, ndtri

from tabmem.data.copula import SHRINKAGE, GaussianCopula, TableModel, is_numeric
from tabmem.data.values import finite_number, normalize_value

DISCRETE_VALUES = 30
"""A number column with at most this many values is answered by its most probable value;
one with more (a measurement) by the value that holds the conditional median."""
SMOOTHING = 0.5
"""A value its stratum lacks counts as this many rows when its likelihood is needed."""
MIN_SD = 1e-3
"""The least conditional standard deviation of a latent score (columns that determine
each other leave almost none)."""
TINY = 1e-300
"""The least probability a log is taken of."""
CACHED_VIEWS = 32
"""Views (strata without some rows) kept, one set of left-out rows each."""


def _interval(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(a < Z < b) for a standard normal Z, accurate in both tails."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return np.where(a > 0, ndtr(-a) - ndtr(-b), ndtr(b) - ndtr(a))


def _interval_of(a: float, b: float) -> float:
    """``_interval`` of one pair, without the arrays (a slice's mass is asked per value)."""
    return float(ndtr(-a) - ndtr(-b)) if a > 0 else float(ndtr(b) - ndtr(a))


@dataclass(frozen=True)
class _Stratum:
    """One copula of the table model and the file rows it was fitted on."""

    key: frozenset[str]
    rows: np.ndarray
    copula: GaussianCopula
    positions: np.ndarray
    counts: tuple[np.ndarray, ...]
    scores: np.ndarray
    to_global: tuple[np.ndarray, ...]
    where: tuple[dict[str, int], ...]
    numbers: tuple[np.ndarray | None, ...]

    @classmethod
    def fit(
        cls,
        key: frozenset[str],
        rows: np.ndarray,
        copula: GaussianCopula,
        raw: Sequence[Sequence[str]],
        books: Sequence[Mapping[str, int]],
    ) -> _Stratum:
        columns = [[raw[i][j] for i in rows.tolist()] for j in copula.modelled]
        positions = np.stack(
            [m.index(c) for m, c in zip(copula.marginals, columns, strict=True)], axis=1
        )
        counts = tuple(
            np.bincount(positions[:, k], minlength=len(m.values))
            for k, m in enumerate(copula.marginals)
        )
        scores = np.empty(positions.shape)
        for k, marginal in enumerate(copula.marginals):
            middles = (marginal.edges[:-1] + marginal.edges[1:]) / 2
            scores[:, k] = ndtri(middles[positions[:, k]])
        to_global = tuple(
            np.array([books[j][v] for v in m.values], dtype=np.int64)
            for j, m in zip(copula.modelled, copula.marginals, strict=True)
        )
        where = tuple({v: p for p, v in enumerate(m.values)} for m in copula.marginals)
        numbers = tuple(
            np.array([finite_number(v) if v != "" else math.nan for v in m.values], dtype=float)
            if is_numeric(m.values)
            else None
            for m in copula.marginals
        )
        return cls(key, rows, copula, positions, counts, scores, to_global, where, numbers)

    def without(self, local: np.ndarray) -> _View:
        """This stratum without the rows at ``local`` (indices among its own rows)."""
        counts = tuple(
            c - np.bincount(self.positions[local, k], minlength=len(c))
            for k, c in enumerate(self.counts)
        )
        size = len(self.rows) - len(local)
        keep = np.ones(len(self.rows), dtype=bool)
        keep[local] = False
        return _View(self, size, counts, _correlation(self.scores[keep]))


def _correlation(scores: np.ndarray) -> np.ndarray:
    """The copula's correlation of these scores, shrunk as ``GaussianCopula.fit`` does."""
    n, d = scores.shape
    correlation = np.eye(d)
    if n > 2 and d > 1:
        centred = scores - scores.mean(axis=0)
        cov = centred.T @ centred
        sd = np.sqrt(np.diag(cov))
        scale = np.where(sd > 1e-12, sd, np.inf)
        correlation = cov / np.outer(scale, scale)
        np.fill_diagonal(correlation, 1.0)
    return (1 - SHRINKAGE) * correlation + SHRINKAGE * np.eye(d)


class _View:
    """A stratum as known without some rows: value counts, slice edges, correlation."""

    def __init__(
        self, stratum: _Stratum, size: int, counts: tuple[np.ndarray, ...], correlation: np.ndarray
    ) -> None:
        self.stratum = stratum
        self.size = size
        self.counts = counts
        self.correlation = correlation
        self.edges = [np.concatenate([[0], np.cumsum(c)]) / max(size, 1) for c in counts]
        self.latent = [ndtri(e) for e in self.edges]
        self._regressions: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, float]] = {}
        self._places: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray] | None] = {}

    def conditional(
        self, k: int, observed: Sequence[int], scores: Sequence[float]
    ) -> tuple[float, float]:
        """Mean and standard deviation of column ``k``'s latent score given observed scores."""
        if not observed:
            return 0.0, 1.0
        coefficients, sd = self._regression(k, tuple(observed))
        return float(coefficients @ np.asarray(scores)), sd

    def _regression(self, k: int, observed: tuple[int, ...]) -> tuple[np.ndarray, float]:
        """Column ``k``'s latent score regressed on the ``observed`` ones: coefficients and
        residual deviation, solved once per set of observed columns (a view answers many rows
        with the same columns shown)."""
        key = (k, observed)
        if key not in self._regressions:
            r = self.correlation
            cross = r[k, list(observed)]
            coefficients = np.linalg.solve(r[np.ix_(observed, observed)], cross)
            variance = 1.0 - float(cross @ coefficients)
            self._regressions[key] = (coefficients, max(math.sqrt(max(variance, 0.0)), MIN_SD))
        return self._regressions[key]

    def masses(self, k: int, mean: float, sd: float) -> np.ndarray:
        """Each value's probability (in copula order) given the latent mean and deviation."""
        latent = self.latent[k]
        return _interval((latent[:-1] - mean) / sd, (latent[1:] - mean) / sd)

    def _place(self, k: int, number: float) -> tuple[float, float] | None:
        """Where a number falls among the stratum's numbers: (slice middle, slice width),
        interpolated between its neighbours; None when the column has no numbers here."""
        if k not in self._places:
            self._places[k] = self._slices(k)
        slices = self._places[k]
        if slices is None:
            return None
        xs, middles, widths = slices
        return float(np.interp(number, xs, middles)), float(np.interp(number, xs, widths))

    def _slices(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Column ``k``'s numbers present in this view, with their slices' middles and
        widths (what ``_place`` interpolates); None when it has none."""
        numbers = self.stratum.numbers[k]
        if numbers is None:
            return None
        present = (self.counts[k] > 0) & ~np.isnan(numbers)
        if not present.any():
            return None
        edges = self.edges[k]
        middles, widths = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
        return numbers[present], middles[present], widths[present]

    def score(self, k: int, value: str) -> float | None:
        """A value's latent score: its slice middle's, or its interpolated place's."""
        position = self.stratum.where[k].get(value)
        if position is not None and self.counts[k][position] > 0:
            return float(ndtri((self.edges[k][position] + self.edges[k][position + 1]) / 2))
        number = finite_number(value) if value else None
        place = self._place(k, number) if number is not None else None
        return float(ndtri(place[0])) if place else None

    def log_mass(self, k: int, value: str, mean: float, sd: float) -> float:
        """log P(value) for column ``k`` given the latent mean and deviation: its slice's
        probability; an absent number, the conditional density at its place times the width
        of its neighbours' slices; an absent category, ``SMOOTHING`` rows' share."""
        position = self.stratum.where[k].get(value)
        if position is not None and self.counts[k][position] > 0:
            latent = self.latent[k]
            low, high = float(latent[position]), float(latent[position + 1])
            mass = _interval_of((low - mean) / sd, (high - mean) / sd)
            return math.log(max(mass, TINY))
        number = finite_number(value) if value else None
        place = self._place(k, number) if number is not None else None
        if place is None:
            return math.log(SMOOTHING / (self.size + 1))
        z = float(ndtri(place[0]))
        log_density = -0.5 * ((z - mean) / sd) ** 2 + 0.5 * z * z - math.log(sd)
        return log_density + math.log(max(place[1], TINY))


class _Evidence:
    """What is known of one row so far: per stratum, the observed columns' latent scores and
    the log of (stratum share × likelihood of the values added)."""

    def __init__(self, model: CopulaConditionals, views: Sequence[_View]) -> None:
        self.model = model
        self.views = views
        total = sum(v.size for v in views)
        self.log_weight = np.array(
            [math.log(v.size / total) if v.size > 0 else -math.inf for v in views]
        )
        self.observed: list[list[int]] = [[] for _ in views]
        self.scores: list[list[float]] = [[] for _ in views]
        self.added: set[int] = set()

    def copy(self) -> _Evidence:
        """The same evidence, to add more to without changing this one."""
        twin = _Evidence.__new__(_Evidence)
        twin.model, twin.views = self.model, self.views
        twin.log_weight = self.log_weight.copy()
        twin.observed = [list(o) for o in self.observed]
        twin.scores = [list(s) for s in self.scores]
        twin.added = set(self.added)
        return twin

    def live(self) -> list[int]:
        """The strata the evidence has not ruled out."""
        return [h for h, w in enumerate(self.log_weight) if w > -math.inf]

    def add(self, column: int, text: str) -> None:
        """Condition on column ``column`` having the (clean or raw) value ``text``."""
        value = normalize_value(text)
        model = self.model
        if column in self.added or not model.usable(column, value) or column not in model.slot:
            return
        self.added.add(column)
        if column == model.hub:
            holding = [h for h, v in enumerate(self.views) if value in v.stratum.key]
            if holding:
                self.log_weight[[h for h in range(len(self.views)) if h not in holding]] = -math.inf
        k = model.slot[column]
        for h in self.live():
            view = self.views[h]
            mean, sd = view.conditional(k, self.observed[h], self.scores[h])
            self.log_weight[h] += view.log_mass(k, value, mean, sd)
            score = view.score(k, value)
            if score is not None:
                self.observed[h].append(k)
                self.scores[h].append(score)

    def _weights(self) -> tuple[list[int], np.ndarray]:
        """The strata still possible and their posterior weights (summing to 1)."""
        live = self.live()
        if not live:
            return live, np.array([])
        logs = self.log_weight[live]
        weights = np.exp(logs - logs.max())
        return live, weights / weights.sum()

    def probabilities(self, column: int) -> np.ndarray:
        """The modelled column's distribution over the file's values (global codes)."""
        k = self.model.slot[column]
        total = np.zeros(len(self.model.values[column]))
        live, weights = self._weights()
        for h, weight in zip(live, weights.tolist(), strict=True):
            view = self.views[h]
            mean, sd = view.conditional(k, self.observed[h], self.scores[h])
            masses = view.masses(k, mean, sd)
            total += weight * np.bincount(
                view.stratum.to_global[k], weights=masses, minlength=len(total)
            )
        return total

    def log_prob(self, column: int, text: str) -> float:
        """log P(column = text) given the evidence."""
        value = normalize_value(text)
        live, weights = self._weights()
        if column not in self.model.slot or not self.model.usable(column, value) or not live:
            return math.log(SMOOTHING / (self.model.n_rows + 1))
        k = self.model.slot[column]
        terms = []
        for h, weight in zip(live, weights.tolist(), strict=True):
            view = self.views[h]
            mean, sd = view.conditional(k, self.observed[h], self.scores[h])
            terms.append(math.log(max(weight, TINY)) + view.log_mass(k, value, mean, sd))
        return float(logsumexp(terms))


Prefixes = dict[tuple[object, ...], _Evidence]
"""Evidences of records' leading values, kept while records share them
(``CopulaConditionals.log_probs_given_rest``)."""


class CopulaConditionals:
    """The conditional distributions of a table (rows of raw fields) under its copulas."""

    def __init__(self, rows: Sequence[Sequence[str]]) -> None:
        if not rows:
            raise ValueError("a copula model needs at least one row")
        width = len(rows[0])
        self.raw = [list((list(r) + [""] * width)[:width]) for r in rows]
        self.n_rows, self.width = len(self.raw), width
        self.table = TableModel.fit(self.raw)
        self.hub = self.table.hub
        self.counters = {j: int(self.raw[0][j].strip()) for j in self.table.counters}
        self.slot = {j: k for k, j in enumerate(self.table.modelled)}
        normalized = [[normalize_value(r[j]) for r in self.raw] for j in range(width)]
        self.books: list[dict[str, int]] = [{} for _ in range(width)]
        self.codes = np.array(
            [
                [self.books[j].setdefault(v, len(self.books[j])) for v in col]
                for j, col in enumerate(normalized)
            ],
            dtype=np.int64,
        ).T
        self.values = [list(book) for book in self.books]
        self.numeric = [is_numeric(book) for book in self.books]
        self.spellings: list[list[Counter]] = [
            [Counter() for _ in self.books[j]] for j in range(width)
        ]
        for i, row in enumerate(self.raw):
            for j, text in enumerate(row):
                self.spellings[j][self.codes[i, j]][text] += 1
        self.order = [self._numeric_order(j) for j in range(width)]
        self.protect_limit = max(10, round(math.sqrt(self.n_rows)))
        self.strata, self.home, self.local = self._fit_strata()
        self._bases = tuple(s.without(np.array([], dtype=np.int64)) for s in self.strata)
        self._views = lru_cache(maxsize=CACHED_VIEWS)(self._make_views)

    def _numeric_order(self, column: int) -> np.ndarray:
        values = self.values[column]
        if not self.numeric[column]:
            return np.arange(len(values))
        return np.array(
            sorted(
                range(len(values)), key=lambda c: (values[c] != "", finite_number(values[c]) or 0.0)
            )
        )

    def _fit_strata(self) -> tuple[tuple[_Stratum, ...], np.ndarray, np.ndarray]:
        """Each copula's rows; per file row, its stratum and its place among the stratum's rows."""
        home = np.zeros(self.n_rows, dtype=np.int64)
        if self.hub is not None:
            hub = self.codes[:, self.hub]
            for h, key in enumerate(self.table.strata):
                codes = [self.books[self.hub][v] for v in key]
                home[np.isin(hub, codes)] = h
        local = np.zeros(self.n_rows, dtype=np.int64)
        strata = []
        for h, (key, copula) in enumerate(zip(self.table.strata, self.table.copulas, strict=True)):
            members = np.flatnonzero(home == h)
            local[members] = np.arange(len(members))
            strata.append(_Stratum.fit(frozenset(key), members, copula, self.raw, self.books))
        return tuple(strata), home, local

    def _make_views(self, left_out: frozenset[int]) -> tuple[_View, ...]:
        rows = np.array(sorted(left_out), dtype=np.int64)
        views = []
        for h, stratum in enumerate(self.strata):
            mine = rows[self.home[rows] == h] if rows.size else rows
            views.append(stratum.without(self.local[mine]) if mine.size else self._bases[h])
        return tuple(views)

    def usable(self, column: int, value: str) -> bool:
        """Whether a (normalized) value tells anything: one of the column's values, or a number
        in a number column (a mask such as ``[hidden]`` does not)."""
        if value in self.books[column]:
            return True
        return self.numeric[column] and finite_number(value) is not None

    def matching(self, given: Mapping[int, str]) -> np.ndarray:
        """Rows that agree with every usable given value."""
        agree = np.ones(self.n_rows, dtype=bool)
        for j, text in given.items():
            value = normalize_value(text)
            if self.usable(j, value):
                agree &= self.codes[:, j] == self.books[j].get(value, -1)
        return agree

    def asked(self, given: Mapping[int, str]) -> frozenset[int]:
        """The rows the given values may describe: those agreeing with all of them, when there
        are at most ``protect_limit`` (the neighbour learner's ``k``); none otherwise."""
        usable = {j: v for j, v in given.items() if self.usable(j, normalize_value(v))}
        if not usable:
            return frozenset()
        rows = np.flatnonzero(self.matching(usable))
        return frozenset(rows.tolist()) if rows.size <= self.protect_limit else frozenset()

    def evidence(self, given: Mapping[int, str], left_out: Collection[int] = ()) -> _Evidence:
        """The evidence of the given values (column -> text) in the file without ``left_out``."""
        found = _Evidence(self, self._views(frozenset(left_out)))
        for j in sorted(given):
            found.add(j, given[j])
        return found

    def log_probs_given_rest(
        self,
        record: Mapping[int, str],
        columns: Sequence[int],
        left_out: Collection[int] = (),
        prefixes: Prefixes | None = None,
    ) -> list[float]:
        """For each of ``columns``, log P(its value | the record's other values) in the file
        without ``left_out``: what ``evidence(others, left_out).log_prob`` gives, with the
        evidence of the values before each column (in column order) built once and copied.
        ``prefixes`` keeps those evidences across records that begin with the same values
        (the options of one question)."""
        prefixes = {} if prefixes is None else prefixes
        gone = frozenset(left_out)
        order = sorted(record)
        out = []
        for j in columns:
            at = order.index(j)
            found = self._prefix(gone, tuple((c, record[c]) for c in order[:at]), prefixes).copy()
            for c in order[at + 1 :]:
                found.add(c, record[c])
            out.append(found.log_prob(j, record[j]))
        return out

    def _prefix(
        self,
        left_out: frozenset[int],
        values: tuple[tuple[int, str], ...],
        prefixes: Prefixes,
    ) -> _Evidence:
        """The evidence of ``values`` (added in their order), kept in ``prefixes``."""
        key = (left_out, *values)
        if key not in prefixes:
            if values:
                found = self._prefix(left_out, values[:-1], prefixes).copy()
                found.add(*values[-1])
            else:
                found = _Evidence(self, self._views(left_out))
            prefixes[key] = found
        return prefixes[key]

    def probabilities(
        self, column: int, evidence: _Evidence, left_out: Collection[int] = ()
    ) -> np.ndarray:
        """The column's distribution over its values; a column the copulas do not model
        (a counter) by its values' shares among the rows not left out."""
        if column in self.slot:
            return evidence.probabilities(column)
        codes = self.codes[:, column]
        counts = np.bincount(codes, minlength=len(self.values[column])).astype(float)
        out = np.array(sorted(left_out), dtype=np.int64)
        if out.size:
            counts -= np.bincount(codes[out], minlength=len(counts))
        return counts

    def choose(
        self,
        column: int,
        probabilities: np.ndarray,
        draw: random.Random | None,
    ) -> int | None:
        """A value code: drawn from ``probabilities`` with ``draw``, else the most likely one
        (the conditional median's value for a measurement). None when nothing is possible."""
        total = float(probabilities.sum())
        if total <= 0:
            return None
        if draw is not None:
            cumulative = np.cumsum(probabilities)
            at = int(np.searchsorted(cumulative, draw.random() * total, side="right"))
            code = min(at, len(cumulative) - 1)
            return code if probabilities[code] > 0 else int(np.flatnonzero(probabilities)[-1])
        if self.numeric[column] and len(self.values[column]) > DISCRETE_VALUES:
            order = self.order[column]
            cumulative = np.cumsum(probabilities[order])
            return int(order[np.searchsorted(cumulative, cumulative[-1] / 2, side="left")])
        return int(np.argmax(probabilities))

    def spell(
        self,
        column: int,
        code: int,
        left_out: Collection[int] = (),
        draw: random.Random | None = None,
        prefix: str = "",
    ) -> str | None:
        """A raw spelling the file uses for value ``code`` (the most frequent, or one drawn by
        frequency), counting only rows not left out and spellings that begin with ``prefix``."""
        counts = self._spelling_counts(column, code, left_out)
        texts = [t for t, n in counts.items() if n > 0 and t.startswith(prefix)]
        if not texts:
            return None
        weights = [counts[t] for t in texts]
        if draw is not None:
            return draw.choices(texts, weights=weights)[0]
        return texts[int(np.argmax(weights))]

    def _spelling_counts(self, column: int, code: int, left_out: Collection[int]) -> Counter:
        counts = Counter(self.spellings[column][code])
        for i in left_out:
            if self.codes[i, column] == code:
                counts[self.raw[i][column]] -= 1
        return counts

    def spelled_from(self, column: int, prefix: str, left_out: Collection[int]) -> np.ndarray:
        """Per value code, whether a row not left out spells it beginning with ``prefix``."""
        removed = Counter(self.raw[i][column] for i in left_out)
        return np.array(
            [
                any(t.startswith(prefix) and n > removed[t] for t, n in spellings.items())
                for spellings in self.spellings[column]
            ],
            dtype=bool,
        )
