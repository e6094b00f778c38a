"""Accuracy of predictions: standard error, a 95 % interval, and a test against a baseline rate.

The interval is Wilson's score interval, which stays inside [0, 1] and keeps its coverage
for small counts and rates near 0 or 1, where the normal approximation does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Accuracy:
    """``correct`` of ``n`` predictions right, with its standard error and 95 % interval."""

    correct: int
    n: int

    @property
    def rate(self) -> float:
        return self.correct / self.n if self.n else 0.0

    @property
    def standard_error(self) -> float:
        """sqrt(p (1 - p) / n): the spread of the rate over repeated samples of ``n`` rows."""
        return math.sqrt(self.rate * (1 - self.rate) / self.n) if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.correct, self.n)


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for ``k`` successes in ``n`` trials (95 % by default)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def p_above(k: int, n: int, rate: float) -> float:
    """One-sided binomial p-value: the chance of ``k`` or more right in ``n`` at ``rate``."""
    if n <= 0 or k <= 0:
        return 1.0
    if rate >= 1.0:
        return 1.0
    return float(stats.binomtest(k, n, max(rate, 0.0), alternative="greater").pvalue)
