"""Area under the ROC curve of two score samples (the Mann-Whitney statistic), ties counted half.

Why: Min-K% Prob and similar membership scores are judged by how well they rank real
rows above perturbed ones; the AUC is that ranking quality, 0.5 when it is chance.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import rankdata


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """P(score of a random positive > score of a random negative) + 0.5 P(tie)."""
    pos = np.asarray(positives, dtype=float)
    neg = np.asarray(negatives, dtype=float)
    if pos.size == 0 or neg.size == 0:
        raise ValueError("auc needs at least one positive and one negative score")
    ranks = rankdata(np.concatenate([pos, neg]))
    rank_sum = ranks[: pos.size].sum()
    u = rank_sum - pos.size * (pos.size + 1) / 2
    return float(u / (pos.size * neg.size))
