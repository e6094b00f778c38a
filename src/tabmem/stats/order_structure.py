"""Does a block of rows show its order in the data alone (sorted ids, grouped classes)?

Why: the row-order test compares a model's likelihood of the file's row order with shuffled
orders. That is a valid test of memory only if the rows are exchangeable: when adjacent rows
are more alike than in shuffles (an id that counts up, rows sorted by a class), any model can
prefer the real order without having seen the file. This statistic measures that, with no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata


@dataclass(frozen=True)
class RowFeatures:
    """A block of rows as numbers: numeric columns as ranks in [0, 1], text columns as codes."""

    ranks: np.ndarray
    codes: np.ndarray


def row_features(rows: Sequence[Sequence[str]]) -> RowFeatures:
    """Numeric columns ranked (scaled to [0, 1]); every other column coded by value."""
    ranks, codes = [], []
    for column in zip(*rows, strict=True):
        try:
            values = np.asarray([float(v) for v in column])
        except ValueError:
            index = {v: i for i, v in enumerate(dict.fromkeys(column))}
            codes.append([index[v] for v in column])
            continue
        r = rankdata(values)
        spread = r.max() - r.min()
        ranks.append((r - r.min()) / spread if spread > 0 else np.zeros(len(r)))
    n = len(rows)
    return RowFeatures(
        ranks=np.asarray(ranks, dtype=float).T.reshape(n, len(ranks)),
        codes=np.asarray(codes, dtype=float).T.reshape(n, len(codes)),
    )


def column_adjacency(features: RowFeatures, order: Sequence[int]) -> np.ndarray:
    """How alike neighbouring rows are in this order, per column: minus the mean change.

    A numeric column changes by its rank jump, a text column by 1 when its value changes.
    Higher means smoother: a sorted or grouped column scores higher than a shuffled one.
    """
    index = list(order)
    width = features.ranks.shape[1] + features.codes.shape[1]
    if len(index) < 2:
        return np.zeros(width)
    jumps = [np.abs(np.diff(features.ranks[index], axis=0))]
    jumps.append((np.diff(features.codes[index], axis=0) != 0).astype(float))
    return -np.concatenate(jumps, axis=1).mean(axis=0)


def adjacency(features: RowFeatures, order: Sequence[int]) -> float:
    """How alike neighbouring rows are in this order, over all columns (see column_adjacency)."""
    per_column = column_adjacency(features, order)
    return float(per_column.mean()) if per_column.size else 0.0


def structure_p_value(features: RowFeatures, n_shuffles: int, seed: int) -> float:
    """Is any column smoother in the given row order than in shuffles? Bonferroni over columns.

    Each column's add-one permutation p-value against ``n_shuffles`` seeded shuffles, the
    smallest times the number of columns (capped at 1): small when one column is sorted or
    grouped, such as an id that counts up, even among many unordered columns.
    """
    n = features.ranks.shape[0]
    observed = column_adjacency(features, range(n))
    if observed.size == 0 or n < 3:
        return 1.0
    rng = np.random.default_rng(seed)
    at_least = np.zeros(observed.size)
    for _ in range(n_shuffles):
        at_least += column_adjacency(features, rng.permutation(n)) >= observed - 1e-12
    p_columns = (1 + at_least) / (1 + n_shuffles)
    return float(min(1.0, p_columns.min() * observed.size))
