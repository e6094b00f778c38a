"""A model's hits against a per-query baseline: what a model without the rows could score on
that very query.

Each query has a baseline in [0, 1]: the chance of a random draw being right, or 1 where the
data-only greedy answer (fitted without the queried row) is right, whichever is larger. A
model that knows the data's distribution but none of its rows scores no more than that on
average; the one-sided t-test on the per-query differences asks whether this model does.
Comparing query by query removes the difference between easy and hard queries from the noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tabmem.stats.prefixes import greater_t_test


@dataclass(frozen=True)
class PairedBaseline:
    """The model's rate, the mean per-query baseline, and the p-value of their difference."""

    n: int
    rate: float
    baseline: float
    p_value: float

    @property
    def effect(self) -> float:
        return self.rate - self.baseline


def query_baselines(chances: Sequence[float], greedy_right: Sequence[bool]) -> list[float]:
    """Per query, the better of a random draw's chance and the greedy data-only answer."""
    return [max(float(c), float(g)) for c, g in zip(chances, greedy_right, strict=True)]


def against_baseline(hits: Sequence[float], baselines: Sequence[float]) -> PairedBaseline:
    """Hits (0 to 1 per query) against per-query baselines; one-sided t-test on differences."""
    scores = np.asarray(hits, dtype=float)
    base = np.asarray(baselines, dtype=float)
    if scores.shape != base.shape:
        raise ValueError("against_baseline needs one baseline per query")
    if scores.size == 0:
        return PairedBaseline(0, 0.0, 0.0, 1.0)
    return PairedBaseline(
        n=int(scores.size),
        rate=float(scores.mean()),
        baseline=float(base.mean()),
        p_value=greater_t_test((scores - base).tolist()),
    )
