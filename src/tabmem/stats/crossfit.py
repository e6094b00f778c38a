"""Cross-fitting for the reference models that learn a file: folds, and which rows a query
is about, so that a model never answers from the row it is asked about.

Each file's rows are split into ``FOLDS`` folds (identical rows in one fold; which fold is
seeded by the file's name) and every fit is made once per fold, on the rows of the other
folds. A query is answered by the fit of the fold that holds out its asked row:

- a CSV continuation of the file's text: the row where the prompt stops (the first row
  written, the one a test scores);
- a question, an observation request or an option list: the first of the rows that agree
  with every value shown (or shared by all options), when at most ``max(10, sqrt(n))`` do;
- otherwise the asked row cannot be identified (no row agrees, or a group of many rows does)
  and the fold is a hash of the values shown: the same prompt always gets the same fold.

The forest learner (``tabmem.llm.oracle.forest``) and the adversary panel
(``tabmem.llm.oracle.panel``) share it, and with it the same folds of a file.
"""

from __future__ import annotations

import json
import math
import random
import zlib
from collections.abc import Collection, Mapping, Sequence
from functools import cached_property

import numpy as np

from tabmem.data.values import normalize_value
from tabmem.stats.neighbours import Column

FOLDS = 5
"""Each model is fitted once per fold, on the rows of the other folds."""
SUPPORT_ROWS = 4000
"""A fold's training rows beyond this many are sampled down (seeded): what its fits see."""


def stable_seed(*parts: object) -> int:
    """A stable 31-bit seed from the parts' text."""
    return zlib.crc32(":".join(map(str, parts)).encode()) & 0x7FFFFFFF


class CrossFitted:
    """A table (rows of value strings) split into folds, and the rows a query is about."""

    def __init__(self, rows: Sequence[Sequence[str]], name: str, folds: int = FOLDS) -> None:
        if not rows:
            raise ValueError(f"a model of {name} needs at least one row")
        self.name = name
        self.n_rows = len(rows)
        self.folds = folds
        self.columns = [Column.of([row[j] for row in rows]) for j in range(len(rows[0]))]
        self.k = max(10, round(math.sqrt(self.n_rows)))

    @cached_property
    def fold_of(self) -> np.ndarray:
        """Each row's fold: identical rows share one, groups dealt out in a seeded order."""
        groups: dict[tuple[str, ...], list[int]] = {}
        for i in range(self.n_rows):
            groups.setdefault(tuple(c.values[i] for c in self.columns), []).append(i)
        order = list(groups.values())
        random.Random(f"forest:{self.name}").shuffle(order)
        fold_of = np.empty(self.n_rows, dtype=np.int64)
        for g, members in enumerate(order):
            fold_of[members] = g % self.folds
        return fold_of

    def training(self, fold: int) -> np.ndarray:
        """The rows of the other folds (``SUPPORT_ROWS`` at most, a seeded sample)."""
        rows = np.flatnonzero(self.fold_of != fold)
        if rows.size > SUPPORT_ROWS:
            sample = np.random.default_rng(stable_seed(self.name, fold))
            rows = np.sort(sample.choice(rows, SUPPORT_ROWS, replace=False))
        return rows

    @cached_property
    def ranks(self) -> list[dict[str, int]]:
        """Each text column's values in sorted order, as a fit's numeric input."""
        return [{v: r for r, v in enumerate(sorted(c.book))} for c in self.columns]

    def feature(self, column: int, value: str) -> float:
        """A value as a fit's input: a number as itself, text as its rank, missing as NaN."""
        value = normalize_value(value)
        if self.columns[column].numbers is not None:
            try:
                return float(value)
            except ValueError:
                return math.nan
        return float(self.ranks[column].get(value, math.nan))

    @cached_property
    def features(self) -> np.ndarray:
        """Every row's values as a fit's inputs (rows × columns)."""
        out = np.empty((self.n_rows, len(self.columns)), dtype=np.float32)
        for j, column in enumerate(self.columns):
            if column.numbers is not None:
                out[:, j] = column.numbers
            else:
                ranks = self.ranks[j]
                out[:, j] = [ranks[v] for v in column.values]
        return out

    def number(self, column: int, value: str) -> float:
        """A value of a numeric column as a number (NaN when it is none or the column is not
        numeric)."""
        if self.columns[column].numbers is None:
            return math.nan
        try:
            return float(normalize_value(value))
        except ValueError:
            return math.nan

    def usable(self, given: Mapping[int, str]) -> dict[int, str]:
        """The given values a fit can take: known values, or numbers in a numeric column
        (a mask such as ``[hidden]`` is dropped)."""
        return {
            j: v
            for j, v in given.items()
            if normalize_value(v) in self.columns[j].book or not math.isnan(self.number(j, v))
        }

    def matching(self, given: Mapping[int, str]) -> np.ndarray:
        """Rows that agree with every given value."""
        agree = np.ones(self.n_rows, dtype=bool)
        for j, value in given.items():
            agree &= self.columns[j].equal(value)
        return agree

    def asked(
        self, given: Mapping[int, str], exclude: Collection[int] = (), protect: bool = True
    ) -> list[int]:
        """The rows a query may be about, first the one whose fold answers: ``exclude`` in its
        order, then (with ``protect``) the rows agreeing with every given value when at most
        ``k`` do."""
        asked = list(exclude)
        if protect and given:
            agree = np.flatnonzero(self.matching(given))
            if agree.size <= self.k:
                known = set(asked)
                asked += [int(r) for r in agree if int(r) not in known]
        return asked

    def fold(self, given: Mapping[int, str], asked: Sequence[int]) -> int:
        """The fold that answers: the one holding out the first asked row; without one, a hash
        of the given values."""
        if asked:
            return int(self.fold_of[asked[0]])
        shown = sorted((j, normalize_value(v)) for j, v in given.items())
        return stable_seed(json.dumps(shown)) % self.folds

    def options_asked(
        self, options: Sequence[Mapping[int, str]], exclude: Collection[int] = ()
    ) -> tuple[list[dict[int, str]], list[int], int]:
        """A multiple-choice question's options as the values a fit can take, the rows it may
        be about (those agreeing with every value all options share: the record asked about)
        and the fold that answers it."""
        usable = [self.usable(option) for option in options]
        shared = {j: v for j, v in usable[0].items() if all(u.get(j) == v for u in usable[1:])}
        asked = self.asked(shared, exclude)
        return usable, asked, self.fold(shared, asked)

    def question(
        self,
        target: int,
        given: Mapping[int, str],
        exclude: Collection[int] = (),
        protect: bool = True,
    ) -> tuple[dict[int, str], list[int], int]:
        """A question about column ``target``: the given values a fit can take (the target's
        own left out), the rows it may be about, and the fold that answers it."""
        usable = {j: v for j, v in self.usable(given).items() if j != target}
        asked = self.asked(usable, exclude, protect)
        return usable, asked, self.fold(usable, asked)
