"""Permutation tests with exact, add-one p-values (never 0, valid at any number of draws).

Why: the log-probability tests compare what a model prefers on real data with the same
data rearranged; under "the model has not memorized it" the arrangement is exchangeable,
so shuffling labels or orders gives the null distribution without a parametric model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tabmem.stats.auc import auc


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


def paired_auc_test(
    real: Sequence[float], perturbed: Sequence[float], n_permutations: int, seed: int
) -> PermutationResult:
    """AUC of real against perturbed scores; the null swaps the two labels within each pair.

    ``real[i]`` and ``perturbed[i]`` belong to the same row. If the model cannot tell a
    row from its perturbed copy, which of the two is labelled real is a coin flip.
    """
    a = np.asarray(real, dtype=float)
    b = np.asarray(perturbed, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("paired_auc_test needs two equally long, non-empty score lists")
    rng = np.random.default_rng(seed)
    null = np.empty(n_permutations)
    for i in range(n_permutations):
        swap = rng.random(a.size) < 0.5
        null[i] = auc(np.where(swap, b, a), np.where(swap, a, b))
    return _result(auc(a, b), null)


def rank_against_null(observed: float, null: Sequence[float]) -> PermutationResult:
    """How extreme ``observed`` is among statistics computed on shuffled data (one-sided)."""
    return _result(float(observed), np.asarray(null, dtype=float))
