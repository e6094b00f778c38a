"""A weighted draw over a numpy array that is ``random.Random.choices`` to the bit.

The reference models draw rows by weight from thousands of candidates per field they write;
``choices`` wants Python lists of both. This draw takes the arrays as they are and consumes
the generator exactly as ``choices(population, weights)[0]`` does (one ``random()``, the same
running sums, the same search), so answers stay what they were.
"""

from __future__ import annotations

import random

import numpy as np


def weighted_index(rng: random.Random, weights: np.ndarray) -> int:
    """The index ``rng.choices(range(len(weights)), weights=weights)[0]`` would return."""
    cumulative = np.cumsum(weights, dtype=np.float64)  # sequential, as itertools.accumulate
    total = float(cumulative[-1]) + 0.0
    if not total > 0.0 or not np.isfinite(total):
        raise ValueError("the weights must sum to a finite number above zero")
    point = rng.random() * total
    return int(np.searchsorted(cumulative[:-1], point, side="right"))
