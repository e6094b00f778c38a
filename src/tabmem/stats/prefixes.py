"""Valid completions of a row's first features: does some real row go on with this value?

A completion of the first ``j`` features of a row with a value for feature ``j`` is *valid* when
some real row has those first ``j`` values and that value (values compared after
``normalize_value``). A draw from feature ``j``'s marginal distribution is valid with the
probability ``sum of the data frequencies of the valid values``: the baseline each answer is
compared with.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import stats

from tabmem.data.values import normalize_value


class PrefixIndex:
    """The data's rows as normalized values, with the next values seen after each prefix."""

    def __init__(self, rows: Sequence[Sequence[str]]) -> None:
        self.rows = [tuple(normalize_value(v) for v in row) for row in rows]
        self._next: dict[int, dict[tuple[str, ...], set[str]]] = {}

    def followers(self, prefix: Sequence[str]) -> set[str]:
        """Normalized values that follow ``prefix`` in some real row."""
        j = len(prefix)
        if j not in self._next:
            table: dict[tuple[str, ...], set[str]] = defaultdict(set)
            for row in self.rows:
                table[row[:j]].add(row[j])
            self._next[j] = dict(table)
        return self._next[j].get(tuple(normalize_value(v) for v in prefix), set())

    @cached_property
    def _frequencies(self) -> list[Counter]:
        return [Counter(column) for column in zip(*self.rows, strict=True)]

    def is_valid(self, prefix: Sequence[str], value: str) -> bool:
        """Whether some real row starts with ``prefix`` and goes on with ``value``."""
        return normalize_value(value) in self.followers(prefix)

    def marginal_chance(self, prefix: Sequence[str]) -> float:
        """The chance that a draw from the next feature's marginal distribution is valid."""
        counts = self._frequencies[len(prefix)]
        total = sum(counts.values())
        return sum(counts[v] for v in self.followers(prefix)) / total


def greater_t_test(differences: Sequence[float]) -> float:
    """One-sided one-sample t-test that the mean difference is above zero.

    With fewer than two differences the p-value is 1; with no spread it is 0 when the common
    difference is positive and 1 otherwise (the t statistic is infinite or undefined).
    """
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return 1.0
    if np.allclose(d, d[0]):
        return 0.0 if d[0] > 0 else 1.0
    return float(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)


@dataclass(frozen=True)
class RateInterval:
    """A rate of hits with its 95% Wilson interval."""

    rate: float
    low: float
    high: float


def wilson(hits: int, n: int) -> RateInterval:
    """The rate ``hits / n`` with its 95% Wilson score interval (0 to 1 when ``n`` is 0)."""
    if n == 0:
        return RateInterval(0.0, 0.0, 1.0)
    interval = stats.binomtest(hits, n).proportion_ci(0.95, method="wilson")
    return RateInterval(hits / n, float(interval.low), float(interval.high))
