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
    """A block of rows as numbers: numeric columns as ranks in [0, 1], text columns as codes.

    ``columns`` gives, for each entry of ``column_adjacency`` (numeric columns first, then
    text columns), the position of its column in the row.
    """

    ranks: np.ndarray
    codes: np.ndarray
    columns: tuple[int, ...] = ()


def row_features(rows: Sequence[Sequence[str]]) -> RowFeatures:
    """Numeric columns ranked (scaled to [0, 1]); every other column coded by value."""
    ranks, codes, numeric, text = [], [], [], []
    for position, column in enumerate(zip(*rows, strict=True)):
        try:
            values = np.asarray([float(v) for v in column])
        except ValueError:
            index = {v: i for i, v in enumerate(dict.fromkeys(column))}
            codes.append([index[v] for v in column])
            text.append(position)
            continue
        r = rankdata(values)
        spread = r.max() - r.min()
        ranks.append((r - r.min()) / spread if spread > 0 else np.zeros(len(r)))
        numeric.append(position)
    n = len(rows)
    return RowFeatures(
        ranks=np.asarray(ranks, dtype=float).T.reshape(n, len(ranks)),
        codes=np.asarray(codes, dtype=float).T.reshape(n, len(codes)),
        columns=tuple(numeric + text),
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


@dataclass(frozen=True)
class BlockOrder:
    """How smooth the block's own order is among shuffles: one add-one permutation p-value
    per column (order of ``column_adjacency``) and one for all columns together."""

    column_p: np.ndarray
    overall_p: float

    @property
    def bonferroni_p(self) -> float:
        """The smallest column p-value times the number of columns, capped at 1."""
        if self.column_p.size == 0:
            return 1.0
        return float(min(1.0, self.column_p.min() * self.column_p.size))


def block_order(features: RowFeatures, n_shuffles: int, seed: int) -> BlockOrder:
    """Each column's, and the mean over columns', adjacency in the block's order against
    ``n_shuffles`` seeded shuffles: (1 + shuffles at least as smooth) / (1 + n_shuffles)."""
    n = features.ranks.shape[0]
    observed = column_adjacency(features, range(n))
    if observed.size == 0 or n < 3:
        return BlockOrder(np.ones(observed.size), 1.0)
    rng = np.random.default_rng(seed)
    at_least = np.zeros(observed.size)
    overall = 0
    for _ in range(n_shuffles):
        shuffled = column_adjacency(features, rng.permutation(n))
        at_least += shuffled >= observed - 1e-12
        overall += shuffled.mean() >= observed.mean() - 1e-12
    return BlockOrder((1 + at_least) / (1 + n_shuffles), float((1 + overall) / (1 + n_shuffles)))
