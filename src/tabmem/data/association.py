"""How much one column of a table tells about another: mutual information on coarse codes.

Columns are first coded coarsely (``coarse_codes``: numbers in quantile bins, other values as
their most frequent categories), so a measurement and a category compare on the same footing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np


def _number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        return math.nan
    return number if math.isfinite(number) else math.nan


def coarse_codes(
    values: Sequence[str], n_bins: int = 10, max_categories: int | None = None
) -> np.ndarray:
    """A column of normalized values as integer codes: quantile bins of a numeric column with
    more than ``n_bins`` values (missing values in a code of their own), else its
    ``max_categories`` (default ``n_bins``) most frequent values and one code for all others."""
    present = [v for v in values if v != ""]
    distinct = set(values)
    if present and len(distinct) > n_bins and all(not math.isnan(_number(v)) for v in present):
        numbers = np.array([_number(v) if v != "" else math.nan for v in values])
        finite = numbers[~np.isnan(numbers)]
        edges = np.unique(np.quantile(finite, np.linspace(0, 1, n_bins + 1)[1:-1]))
        binned = np.searchsorted(edges, numbers, side="right")
        return np.where(np.isnan(numbers), n_bins, binned)
    keep = max_categories or n_bins
    top = {value: code for code, (value, _) in enumerate(Counter(values).most_common(keep))}
    return np.array([top.get(v, keep) for v in values], dtype=np.int64)


def _entropy(codes: np.ndarray) -> float:
    counts = np.bincount(codes)
    shares = counts[counts > 0] / codes.size
    return float(-(shares * np.log(shares)).sum())


def information_share(given: np.ndarray, target: np.ndarray) -> float:
    """Mutual information of two coded columns over the target's entropy (0 to 1): the share
    of the target's uncertainty that knowing ``given`` removes."""
    h_target = _entropy(target)
    if h_target == 0.0:
        return 0.0
    joint = given * (int(target.max()) + 1) + target
    mutual = _entropy(given) + h_target - _entropy(joint)
    return max(0.0, min(1.0, mutual / h_target))


def relevance(given: np.ndarray, target: np.ndarray) -> float:
    """How much a coded column tells about another, corrected for chance (adjusted mutual
    information, 0 when it tells nothing): a column of many categories, each in few rows,
    shares much information with anything by chance alone, and this does not count it."""
    from sklearn.metrics import adjusted_mutual_info_score

    return max(0.0, float(adjusted_mutual_info_score(target, given)))
