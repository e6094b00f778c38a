"""Permutation tests: add-one Monte Carlo p-values (never 0, valid at any number of draws),
and the paired sign test, whose permutation distribution is known exactly.

Why: the log-probability tests compare what a model prefers on real data with the same
data rearranged; under "the model has not memorized it" the arrangement is exchangeable,
so shuffling labels or orders gives the null distribution without a parametric model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tabmem.stats.pvalues import binomial_greater


@dataclass(frozen=True)
class PermutationResult:
    """The observed statistic, its one-sided p-value and the null draws it came from."""

    statistic: float
    p_value: float
    n_permutations: int
    null_mean: float
    null_sd: float


def add_one_p_value(observed: float, null: Sequence[float]) -> float:
    """(1 + #{null >= observed}) / (1 + n): the p-value of a one-sided Monte Carlo test."""
    draws = np.asarray(null, dtype=float)
    return float((1 + np.sum(draws >= observed)) / (1 + draws.size))


def _result(observed: float, null: np.ndarray) -> PermutationResult:
    return PermutationResult(
        statistic=observed,
        p_value=add_one_p_value(observed, null),
        n_permutations=int(null.size),
        null_mean=float(null.mean()) if null.size else float("nan"),
        null_sd=float(null.std(ddof=1)) if null.size > 1 else float("nan"),
    )


@dataclass(frozen=True)
class SignTest:
    """Pairs where the first score is higher (wins), lower (losses) or equal (ties), the share
    of untied pairs won, and the exact one-sided p-value of that many wins."""

    wins: int
    losses: int
    ties: int
    win_rate: float
    p_value: float


def paired_sign_test(first: Sequence[float], second: Sequence[float]) -> SignTest:
    """Does ``first[i]`` beat ``second[i]`` in more pairs than a coin flip would?

    Swapping the two labels within pairs at random (the permutation null when the two members
    of a pair are exchangeable) turns each untied pair into a win or a loss with probability
    1/2, so the number of wins is Binomial(untied pairs, 1/2) and the add-one Monte Carlo
    p-value is replaced by the exact binomial tail. Ties carry no information and are left out.
    """
    a = np.asarray(first, dtype=float)
    b = np.asarray(second, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("paired_sign_test needs two equally long, non-empty score lists")
    wins, losses = int(np.sum(a > b)), int(np.sum(a < b))
    untied = wins + losses
    return SignTest(
        wins=wins,
        losses=losses,
        ties=int(a.size - untied),
        win_rate=wins / untied if untied else 0.5,
        p_value=binomial_greater(wins, untied, 0.5),
    )


def rank_against_null(observed: float, null: Sequence[float]) -> PermutationResult:
    """How extreme ``observed`` is among statistics computed on shuffled data (one-sided)."""
    return _result(float(observed), np.asarray(null, dtype=float))
