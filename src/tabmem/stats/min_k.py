"""Min-K% Prob: how familiar a text is by its least likely tokens (Shi et al., ICLR 2024).

Why: a text seen in training has few surprising tokens; averaging only the k% lowest token
log-probabilities ignores the tokens any model predicts well and keeps the revealing ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def min_k_score(logprobs: Sequence[float], k_percent: float) -> float:
    """Mean of the ceil(k% of n) lowest token log-probabilities (at least one token)."""
    if not logprobs:
        raise ValueError("min_k_score needs at least one token log-probability")
    if not 0 < k_percent <= 100:
        raise ValueError("k_percent must be in (0, 100]")
    count = max(1, math.ceil(len(logprobs) * k_percent / 100))
    lowest = sorted(logprobs)[:count]
    return float(sum(lowest) / count)
