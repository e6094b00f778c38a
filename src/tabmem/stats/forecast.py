"""Forecast errors, their intervals, and the before/after-cutoff test of ``test=forecast``.

The error of one forecast is the robust relative error ``min(|ŷ − y| / |y|, cap)``: the cap
(2% by default, as in Bordt et al. 2024) keeps one wild answer from dominating a mean. Errors of
neighbouring days are correlated (calm and turbulent weeks), so the intervals and the test work
on blocks of consecutive steps rather than on single steps: a moving-block bootstrap for the
interval of a mean, a block permutation test for the shift across the cutoff.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")
_BATCH = 1000
_TIE = 1e-9
"""Differences of mean errors closer than this are ties: values written with a few decimals
give errors that differ in the last bits, which must not decide a p-value."""


def parse_forecast(text: str, date_text: str = "") -> float | None:
    """The first number in a model's answer, or None when it holds no finite number.

    The asked date is removed first (a model that repeats it must not be read as forecasting
    the year); thousands separators are accepted (``1,234.5``).
    """
    if date_text:
        text = text.replace(date_text, " ")
    match = _NUMBER.search(text)
    if match is None:
        return None
    value = float(match.group().replace(",", ""))
    return value if math.isfinite(value) else None


def robust_relative_error(
    forecast: Sequence[float] | np.ndarray, truth: Sequence[float] | np.ndarray, cap: float
) -> np.ndarray:
    """``min(|forecast − truth| / |truth|, cap)`` per step; a true zero scores 0 only if hit."""
    forecast = np.asarray(forecast, dtype=float)
    truth = np.asarray(truth, dtype=float)
    gap = np.abs(forecast - truth)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(truth != 0, gap / np.abs(truth), np.where(gap == 0, 0.0, np.inf))
    return np.minimum(relative, cap)


def block_bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    block_length: int,
    n_resamples: int,
    level: float,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """A percentile interval for the mean of ``values`` (in time order), by moving blocks.

    Resamples glue together random runs of ``block_length`` consecutive steps (at most half the
    series, so resamples differ), which keeps the correlation of neighbouring steps. NaN for no
    values; a single value is its own interval.
    """
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return (math.nan, math.nan)
    if n == 1:
        return (float(x[0]), float(x[0]))
    length = max(1, min(block_length, n // 2))
    starts = rng.integers(0, n - length + 1, size=(n_resamples, math.ceil(n / length)))
    index = (starts[..., None] + np.arange(length)).reshape(n_resamples, -1)[:, :n]
    means = x[index].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return (float(low), float(high))


def block_means(values: Sequence[float] | np.ndarray, block_length: int) -> np.ndarray:
    """Means of consecutive blocks of about ``block_length`` steps (sizes differ by at most 1)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return x
    blocks = max(1, round(len(x) / max(1, block_length)))
    return np.array([chunk.mean() for chunk in np.array_split(x, blocks)])


@dataclass(frozen=True)
class ShiftTest:
    """Is the mean after the cutoff higher than before it? One-sided, on block means.

    ``difference`` is mean(after blocks) − mean(before blocks); ``exact`` says the p-value
    enumerated every assignment of blocks to the two sides rather than sampling them.
    """

    difference: float
    p_value: float
    n_blocks_before: int
    n_blocks_after: int
    exact: bool


def _differences(means: np.ndarray, after_sets: np.ndarray) -> np.ndarray:
    """mean(after) − mean(before) for each row of block indices ``after_sets``."""
    total = means.sum()
    n_after = after_sets.shape[1]
    after_sum = means[after_sets].sum(axis=1)
    return after_sum / n_after - (total - after_sum) / (len(means) - n_after)


def shift_test(
    before: Sequence[float] | np.ndarray,
    after: Sequence[float] | np.ndarray,
    block_length: int,
    n_permutations: int,
    rng: np.random.Generator,
) -> ShiftTest:
    """Block permutation test of H0 "the blocks are exchangeable across the cutoff" against
    "values are higher after the cutoff".

    Each side (in time order) is cut into blocks of about ``block_length`` steps; the statistic
    is the difference of the two sides' mean block means. The p-value is exact when there are at
    most ``n_permutations`` ways to assign the blocks, else ``(1 + hits) / (1 + n_permutations)``
    from random assignments. With no block on a side the p-value is 1.
    """
    b = block_means(before, block_length)
    a = block_means(after, block_length)
    if len(a) == 0 or len(b) == 0:
        return ShiftTest(math.nan, 1.0, len(b), len(a), exact=True)
    means = np.concatenate([a, b])
    observed = float(a.mean() - b.mean())
    threshold = observed - _TIE
    n_ways = math.comb(len(means), len(a))
    if n_ways <= n_permutations:
        sets = np.array(list(itertools.combinations(range(len(means)), len(a))))
        hits = int((_differences(means, sets) >= threshold).sum())
        return ShiftTest(observed, hits / n_ways, len(b), len(a), exact=True)
    hits = 0
    for start in range(0, n_permutations, _BATCH):
        size = min(_BATCH, n_permutations - start)
        order = rng.permuted(np.tile(np.arange(len(means)), (size, 1)), axis=1)
        hits += int((_differences(means, order[:, : len(a)]) >= threshold).sum())
    return ShiftTest(observed, (1 + hits) / (1 + n_permutations), len(b), len(a), exact=False)
