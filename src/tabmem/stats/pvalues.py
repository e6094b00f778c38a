"""One-sided p-values and confidence intervals for the memorization tests.

Every test asks whether the model does *better* than a baseline, so every p-value here is
one-sided ("greater"); a model doing worse than the baseline gets a p-value near 1.
scipy.stats is imported on first use: a second of every cell's start-up, which a cell whose
p-values need no distribution (no hit at all) never spends.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def binomial_greater(k: int, n: int, p0: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p0): the chance of ``k`` or more hits at rate ``p0``."""
    if n <= 0 or k <= 0:
        return 1.0
    if p0 <= 0.0:
        return 0.0
    if p0 >= 1.0:
        return 1.0
    from scipy import stats

    return float(stats.binom.sf(k - 1, n, p0))


def mcnemar_greater(model_only: int, baseline_only: int) -> float:
    """Exact one-sided McNemar test on paired hits: is the model right more often than the
    baseline where the two disagree? ``model_only`` / ``baseline_only`` count the queries
    only the model / only the baseline got right."""
    discordant = model_only + baseline_only
    if discordant == 0:
        return 1.0
    return binomial_greater(model_only, discordant, 0.5)


def wilcoxon_greater(differences: Sequence[float]) -> float:
    """One-sided Wilcoxon signed-rank test that paired differences are centred above zero.

    Zero differences are dropped (Wilcox's rule); with none left the p-value is 1.
    """
    d = np.asarray([x for x in differences if x != 0.0], dtype=float)
    if d.size == 0:
        return 1.0
    from scipy import stats

    return float(stats.wilcoxon(d, alternative="greater", zero_method="wilcox").pvalue)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact two-sided confidence interval for a rate of ``k`` hits in ``n`` queries."""
    if n <= 0:
        return 0.0, 1.0
    from scipy import stats

    tail = (1.0 - level) / 2.0
    low = 0.0 if k == 0 else float(stats.beta.ppf(tail, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1.0 - tail, k + 1, n - k))
    return low, high
