"""A model's hits against a per-query baseline: what a model without the rows could score on
that very query.

Each query has a baseline in [0, 1]: the chance of a random draw being right, or 1 where the
data-only greedy answer (fitted without the queried row) is right, whichever is larger. A
model that knows the data's distribution but none of its rows is right on each query with at
most that probability, so under that null the number of hits is at most a sum of independent
Bernoulli draws with the baselines as probabilities (a Poisson-binomial variable); the p-value
is its exact upper tail at the observed hits. Comparing query by query removes the difference
between easy and hard queries from the noise, and the exact tail stays valid for few queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tabmem.stats.modes import poisson_binomial_tail


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
    """Hits (0 or 1 per query) against per-query baselines: the exact probability of as many
    hits or more if each query were right with its baseline's probability."""
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
        p_value=poisson_binomial_tail(base.tolist(), round(float(scores.sum()))),
    )


def unreachable_reason(
    baselines: Sequence[float], alpha: float, min_effect: float, what: str
) -> str:
    """Why even a model right on every query could not reach ``evidence`` against these
    baselines ("" when it could): the effect left is under ``min_effect``, or all hits would
    not be significant."""
    if not baselines:
        return f"no query about {what} could be asked"
    perfect = against_baseline([1.0] * len(baselines), baselines)
    if perfect.effect < min_effect:
        return (
            f"the data-only baseline already gets {what} right at a rate of "
            f"{perfect.baseline:.3f}, leaving less than the minimum effect {min_effect:g}"
        )
    if perfect.p_value >= alpha:
        return (
            f"the data-only baseline gets {what} right at a rate of {perfect.baseline:.3f}, so "
            f"even {len(baselines)} right answers of {len(baselines)} would give "
            f"p={perfect.p_value:.3g}, not below {alpha:g}"
        )
    return ""
