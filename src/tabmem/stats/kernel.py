"""The weighted Gaussian kernel density of a measurement among a model's chosen rows: how the
nearest-neighbour model (``tabmem.stats.neighbours``), the forest learner and the forest
scorer (``tabmem.llm.oracle``) score a number, and the moments of that score that Min-K%++
standardises by.

The bandwidth is Silverman's rule on the rows' weighted spread, ``spread * n ** -0.2``, kept
above a thousandth of the column's span (a column whose chosen rows agree still gives a
nearby number some density).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

NODES = 64
"""The moments of a log density are read at this many weighted quantiles of its points."""
TINY = 1e-300
"""The least density a number gets (its log is finite)."""


@dataclass(frozen=True)
class Kernel:
    """Points with weights (``share``, summing to 1) and one bandwidth."""

    points: np.ndarray
    share: np.ndarray
    bandwidth: float

    @classmethod
    def of(cls, points: np.ndarray, share: np.ndarray, span: float, count: int = 0) -> Kernel:
        """The kernel of ``points`` weighted by ``share``; ``count``: the rows the spread is
        read from, where that is not the number of points (0: the points)."""
        spread = float(np.sqrt(np.sum(share * (points - np.sum(share * points)) ** 2)))
        rows = count or points.size
        return cls(points, share, max(spread * rows**-0.2, span / 1000, 1e-12))

    def log_density(self, value: float) -> float:
        """The log density at one number."""
        z = (self.points - value) / self.bandwidth
        density = float(np.sum(self.share * np.exp(-0.5 * z * z))) / (
            self.bandwidth * math.sqrt(2 * math.pi)
        )
        return math.log(max(density, TINY))

    def log_densities(self, values: np.ndarray) -> np.ndarray:
        """The log density at each of several numbers."""
        z = (self.points[None, :] - values[:, None]) / self.bandwidth
        density = np.exp(-0.5 * z * z) @ self.share / (self.bandwidth * math.sqrt(2 * math.pi))
        return np.log(np.maximum(density, TINY))

    def nodes(self) -> np.ndarray:
        """``NODES`` weighted quantiles of the points: where a draw from the density falls."""
        order = np.argsort(self.points, kind="stable")
        at = np.searchsorted(np.cumsum(self.share[order]), (np.arange(NODES) + 0.5) / NODES)
        return self.points[order][np.minimum(at, self.points.size - 1)]

    def log_moments(self, offset: float = 0.0, cap: float = math.inf) -> tuple[float, float]:
        """The mean and sd of the log density (plus ``offset``, at most ``cap``) of a draw,
        read at ``nodes``."""
        logs = np.minimum(self.log_densities(self.nodes()) + offset, cap)
        return float(logs.mean()), float(logs.std())
