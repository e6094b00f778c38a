"""A data-only model of a table's conditional distributions: the values of similar rows.

Given some of a row's values, the model finds the ``k`` most similar rows of the file (a
weighted Gower distance over the given columns, each column weighted by how much it tells
about the asked one: adjusted mutual information, at least ``MIN_WEIGHT``) and reads the
asked column's values off those neighbours: their most frequent value is the greedy answer,
one of them drawn at random a sample, their frequencies a score. It is what a model that
knows the data's joint distribution, but has read none of the rows it is asked about, could
answer.

It never answers from the rows asked about: rows that agree with *every* given value could be
the queried row, so when there are at most ``k`` of them they are left out (``protect``) and
the answer comes from the nearest rows that differ. With more than ``k`` such rows the given
values describe a group, not a row, and the answer is that group's distribution, of which the
queried row is one member of many. ``exclude`` leaves out rows a caller knows are asked about.
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tabmem.data.association import coarse_codes, relevance
from tabmem.data.values import normalize_value
from tabmem.stats.draws import weighted_index
from tabmem.stats.kernel import Kernel
from tabmem.stats.likelihood import Triple, weighted_moments

MIN_WEIGHT = 0.05
"""The least weight a given column keeps in the distance, however little it tells."""
VOTE_SOFTENING = 0.05
"""A neighbour at distance d votes 1 / (d + 0.05): the nearest count most, none counts alone."""
MAX_CATEGORIES = 200
"""Categories beyond a column's 200 most frequent share one code when weighing columns."""
WEIGHT_MEMO = 4096
"""Targets' column weights a process keeps, by table and target (a few MB at most)."""
DISCRETE_VALUES = 30
"""A column with at most this many distinct values is answered by its most frequent value
among the neighbours; one with more (a measurement) by the neighbours' median."""
RECENT_ARRAYS = 64
"""Per-row equality and distance arrays a model keeps per thread, most recent first: a
choice's options and a row's columns ask the same values many times."""


def _float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        return math.nan
    return number if math.isfinite(number) else math.nan


@dataclass(frozen=True)
class Column:
    """One column as the model reads it: normalized values, codes, numbers where numeric."""

    values: tuple[str, ...]
    book: dict[str, int]
    codes: np.ndarray
    numbers: np.ndarray | None
    span: float

    @classmethod
    def of(cls, values: Sequence[str]) -> Column:
        normalized = tuple(normalize_value(v) for v in values)
        book: dict[str, int] = {}
        codes = np.array([book.setdefault(v, len(book)) for v in normalized], dtype=np.int64)
        present = [v for v in normalized if v != ""]
        numbers = None
        span = 0.0
        if present and all(not math.isnan(_float(v)) for v in present):
            numbers = np.array([_float(v) if v != "" else math.nan for v in normalized])
            finite = numbers[~np.isnan(numbers)]
            span = float(finite.max() - finite.min())
        return cls(normalized, book, codes, numbers, span)

    @property
    def discrete(self) -> bool:
        return self.numbers is None or len(self.book) <= DISCRETE_VALUES

    @cached_property
    def names(self) -> tuple[str, ...]:
        """Each code's value: the inverse of ``book``."""
        return tuple(self.book)

    def equal(self, value: str) -> np.ndarray:
        """Per row, whether this column's value equals ``value`` (compared normalized)."""
        return self.codes == self.book.get(normalize_value(value), -1)

    def distance(self, value: str) -> np.ndarray:
        """Per row, the Gower distance of this column's value to ``value`` (0 to 1)."""
        value = normalize_value(value)
        if self.numbers is None or self.span == 0.0:
            return (~self.equal(value)).astype(float)
        number = _float(value)
        if math.isnan(number):
            return np.where(np.isnan(self.numbers), 0.0, 1.0)
        gap = np.abs(self.numbers - number) / self.span
        return np.where(np.isnan(self.numbers), 1.0, np.minimum(gap, 1.0))


_WEIGHTS: dict[tuple[bytes, int], list[float]] = {}
_WEIGHTS_LOCK = threading.Lock()


class NeighbourModel:
    """The conditional distributions of a table (rows of value strings), by nearest rows."""

    def __init__(self, rows: Sequence[Sequence[str]], k: int | None = None) -> None:
        if not rows:
            raise ValueError("a neighbour model needs at least one row")
        width = len(rows[0])
        self.n_rows = len(rows)
        self.columns = [Column.of([row[j] for row in rows]) for j in range(width)]
        self.k = k or max(10, round(math.sqrt(self.n_rows)))
        self._recent: dict[int, OrderedDict[tuple[str, int, str], np.ndarray]] = {}

    def _array(self, kind: str, j: int, value: str) -> np.ndarray:
        """Column ``j``'s per-row equality with (``kind`` "=") or distance to ("d") ``value``,
        computed once while it stays among the thread's ``RECENT_ARRAYS`` latest."""
        recent = self._recent.setdefault(threading.get_ident(), OrderedDict())
        key = (kind, j, value)
        found = recent.get(key)
        if found is not None:
            recent.move_to_end(key)
            return found
        column = self.columns[j]
        found = column.equal(value) if kind == "=" else column.distance(value)
        found.flags.writeable = False
        recent[key] = found
        if len(recent) > RECENT_ARRAYS:
            recent.popitem(last=False)
        return found

    @cached_property
    def _binned(self) -> list[np.ndarray]:
        return [coarse_codes(c.values, max_categories=MAX_CATEGORIES) for c in self.columns]

    def weight(self, given: int, target: int) -> float:
        """How much column ``given`` counts in the distance when column ``target`` is asked."""
        return max(MIN_WEIGHT, self._weights(target)[given])

    @cached_property
    def _table_key(self) -> bytes:
        """A digest of the coded columns: models of equal rows share their weights."""
        digest = hashlib.blake2b(digest_size=20)
        for codes in self._binned:
            digest.update(f"{codes.dtype.str}{codes.shape}|".encode())
            digest.update(codes.tobytes())
        return digest.digest()

    def _weights(self, target: int) -> list[float]:
        """Each column's relevance to ``target``, computed once a process for a table: every
        model of one file (each cell's learner and partial memorizer) and every thread of
        their server asks the same ones."""
        key = (self._table_key, target)
        found = _WEIGHTS.get(key)
        if found is None:
            with _WEIGHTS_LOCK:
                found = _WEIGHTS.get(key)
                if found is None:
                    binned = self._binned
                    found = [relevance(b, binned[target]) for b in binned]
                    if len(_WEIGHTS) >= WEIGHT_MEMO:
                        _WEIGHTS.pop(next(iter(_WEIGHTS)))
                    _WEIGHTS[key] = found
        return found

    def matching(self, given: Mapping[int, str]) -> np.ndarray:
        """Rows that agree with every given value."""
        agree = np.ones(self.n_rows, dtype=bool)
        for j, value in given.items():
            agree &= self._array("=", j, value)
        return agree

    def usable(self, given: Mapping[int, str]) -> dict[int, str]:
        """The given values the model can use: a value that none of its column's rows has is
        dropped (a mask such as ``[hidden]``), unless the column holds numbers and it is one."""
        kept = {}
        for j, value in given.items():
            column = self.columns[j]
            known = normalize_value(value) in column.book
            if known or (column.numbers is not None and not math.isnan(_float(value))):
                kept[j] = value
        return kept

    def neighbours(
        self,
        target: int,
        given: Mapping[int, str],
        exclude: Collection[int] = (),
        protect: bool = True,
        among: np.ndarray | None = None,
    ) -> Neighbours:
        """The rows closest to the given values (all rows tied at the ``k``-th distance
        included) and their votes, chosen ``among`` a mask of rows (default all), without
        ``exclude`` and, with ``protect``, without the few rows that agree with every given
        value. Given values the model cannot use (``usable``) are ignored."""
        given = {j: v for j, v in self.usable(given).items() if j != target}
        allowed = np.ones(self.n_rows, dtype=bool) if among is None else among.copy()
        allowed[list(exclude)] = False
        if protect and given:
            agree = self.matching(given) & allowed
            if agree.sum() <= self.k:
                allowed &= ~agree
        candidates = np.flatnonzero(allowed)
        total = np.zeros(self.n_rows)
        for j, value in given.items():
            total += self.weight(j, target) * self._array("d", j, value)
        distance = total[candidates]
        if candidates.size > self.k:
            keep = distance <= np.partition(distance, self.k - 1)[self.k - 1]
            candidates, distance = candidates[keep], distance[keep]
        return Neighbours(candidates, 1.0 / (distance + VOTE_SOFTENING))

    @cached_property
    def _code_counts(self) -> list[np.ndarray]:
        """Each column's rows per code."""
        return [np.bincount(c.codes, minlength=len(c.book)) for c in self.columns]

    def pick(
        self,
        target: int,
        given: Mapping[int, str],
        rng: random.Random | None = None,
        exclude: Collection[int] = (),
        protect: bool = True,
        among: np.ndarray | None = None,
    ) -> int | None:
        """A neighbour row whose value of column ``target`` is the answer: without ``rng`` the
        most likely value (the one with the most votes; for a measurement the neighbours'
        weighted median, unless one value is shared by several neighbours and outvotes every
        other, as a zip code is by the letters of one city), with ``rng`` a neighbour drawn
        by its vote. None when no row is left."""
        found = self.neighbours(target, given, exclude, protect, among)
        if not found.rows.size:
            return None
        if rng is not None:
            return int(found.rows[weighted_index(rng, found.votes)])
        column = self.columns[target]
        codes = column.codes[found.rows]
        votes = found.tally(column)
        held, first = np.unique(codes, return_index=True)
        top = held[votes[held] == votes[held].max()]
        # the value with the most votes, ties to the one met first among the neighbours
        leader = int(top[np.argmin(first[np.searchsorted(held, top)])])
        shared = int(np.count_nonzero(codes == leader)) >= 2
        present = found.rows[codes != column.book.get("", -1)]
        if not column.discrete and present.size * 2 > codes.size and not shared:
            return found.median(column.values, present.tolist())
        overall = self._code_counts[target]
        names = column.names
        best = max(top.tolist(), key=lambda c: (overall[c], names[c]))
        return int(found.rows[int(np.argmax(codes == best))])

    def greedy(
        self,
        target: int,
        given: Mapping[int, str],
        exclude: Collection[int] = (),
        protect: bool = True,
    ) -> str:
        """The most likely value of column ``target`` (normalized) given the other values."""
        row = self.pick(target, given, exclude=exclude, protect=protect)
        return "" if row is None else self.columns[target].values[row]

    def log_score(
        self,
        target: int,
        value: str,
        given: Mapping[int, str],
        exclude: Collection[int] = (),
        protect: bool = True,
    ) -> float:
        """How likely ``value`` is for column ``target`` given the other values (a log
        probability for discrete columns, a log kernel density for measurements), from the
        neighbours' votes."""
        return self.triple(target, value, given, exclude, protect, moments=False)[0]

    def triple(
        self,
        target: int,
        value: str,
        given: Mapping[int, str],
        exclude: Collection[int] = (),
        protect: bool = True,
        moments: bool = True,
    ) -> Triple:
        """``log_score``, with the mean and sd of the log score over the same conditional
        distribution (what Min-K%++ standardises by): exactly over a discrete column's
        values; for a measurement, at weighted quantiles of the neighbours' values
        (``Kernel.log_moments``). Without ``moments`` both are 0."""
        value = normalize_value(value)
        column = self.columns[target]
        found = self.neighbours(target, given, exclude, protect)
        total = float(found.votes.sum())
        if column.discrete or value == "" or math.isnan(_float(value)):
            overall = self._code_counts[target]
            code = column.book.get(value)
            prior = ((0 if code is None else int(overall[code])) + 1) / (self.n_rows + overall.size)
            tallies = found.tally(column)
            tally = 0.0 if code is None else float(tallies[code])
            score = math.log((tally + prior) / (total + 1))
            if not moments:
                return score, 0.0, 0.0
            chances = (tallies + (overall + 1) / (self.n_rows + overall.size)) / (total + 1)
            return score, *weighted_moments(np.log(chances), chances)
        keep = [k for k, i in enumerate(found.rows.tolist()) if column.values[i] != ""]
        if not keep:
            return math.log(1e-300), math.log(1e-300), 0.0
        numbers = np.array([_float(column.values[found.rows[k]]) for k in keep])
        kernel = Kernel.of(numbers, found.votes[keep] / found.votes[keep].sum(), column.span)
        score = kernel.log_density(_float(value))
        return (score, *kernel.log_moments()) if moments else (score, 0.0, 0.0)

    def field_scores(
        self,
        options: Sequence[Mapping[int, str]],
        scored: Sequence[Collection[int]],
        exclude: Collection[int] = (),
        moments: bool = False,
    ) -> list[dict[int, Triple]]:
        """Per option, each of its ``scored`` columns' ``triple`` given the option's other
        values (column -> triple, in ``scored``'s order). The rows that agree with every value
        all options share are the record asked about: left out when there are at most ``k``."""
        usable = [self.usable(option) for option in options]
        shared = {j: v for j, v in usable[0].items() if all(u.get(j) == v for u in usable[1:])}
        asked = np.flatnonzero(self.matching(shared)) if shared else np.array([], dtype=int)
        left_out = [*exclude, *(asked.tolist() if asked.size <= self.k else [])]
        return [
            {
                j: self.triple(j, values[j], values, left_out, moments=moments)
                for j in mine
                if j in values
            }
            for values, mine in zip(usable, scored, strict=True)
        ]

    def choice_scores(
        self,
        options: Sequence[Mapping[int, str]],
        scored: Sequence[Collection[int]],
        exclude: Collection[int] = (),
    ) -> list[float]:
        """Each option's log-likelihood: the sum, over its ``scored`` columns, of the value's
        log score given the option's other values (``field_scores``)."""
        return [
            sum(t[0] for t in mine.values()) for mine in self.field_scores(options, scored, exclude)
        ]


@dataclass(frozen=True)
class Neighbours:
    """Neighbour rows and their votes (closer rows vote more)."""

    rows: np.ndarray
    votes: np.ndarray

    def tally(self, column: Column) -> np.ndarray:
        """The summed votes of each of ``column``'s codes; ``np.bincount`` adds the votes in
        the neighbours' order, as a running sum over them would."""
        codes = column.codes[self.rows]
        return np.bincount(codes, weights=self.votes, minlength=len(column.book))

    def median(self, values: Sequence[str], rows: Sequence[int]) -> int:
        """The row holding the vote-weighted median of the (numeric) values of ``rows``."""
        vote = dict(zip(self.rows.tolist(), self.votes.tolist(), strict=True))
        ordered = sorted(rows, key=lambda i: (_float(values[i]), i))
        half, seen = sum(vote[i] for i in ordered) / 2, 0.0
        for row in ordered:
            seen += vote[row]
            if seen >= half:
                return row
        return ordered[-1]
