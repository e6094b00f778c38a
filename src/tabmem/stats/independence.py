"""Are the file's rows in random order? A data-only check that needs no model.

Row completion compares a completion's similarity to the true next row with its
similarity to random other rows; that comparison is fair only if neighbouring rows are
no more alike than random pairs. First token's baselines depend on it too. The check:
the mean similarity of each row to the next one, against the same mean after shuffling
the rows (a permutation test). Per column, similarity is 1 - |rank difference| for
numbers (ranks scaled to [0, 1]) and equality for anything else; a missing value is alike
only to another missing value. A row id, a file sorted by a column or by the target, and
blocks of similar rows all make neighbours more alike than shuffled pairs. A second part
(``text_neighbours``) looks at the rows' text with row completion's own similarity, which
sees what equality of values misses: a running id written as text (``P041``, ``P042``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from tabmem.stats.pvalues import wilcoxon_greater
from tabmem.stats.scoring import levenshtein_similarity

MAX_ROWS = 10_000
CHUNK_VALUES = 50_000  # shuffled values compared per array operation: small enough for the cache
"""Longer files are checked on their first rows only (adjacency needs a contiguous block)."""


@dataclass(frozen=True)
class RowOrder:
    """The outcome of the check: p-value, observed and shuffled similarity, ordered columns."""

    p_value: float
    adjacent_similarity: float
    shuffled_similarity: float
    ordered: bool
    columns: pd.DataFrame
    text_gain: float = 0.0
    text_p_value: float = 1.0

    @property
    def ordered_columns(self) -> list[str]:
        """Columns whose own neighbour similarity is significant (Bonferroni over columns,
        normal approximation to each column's shuffled similarities)."""
        return [str(c) for c in self.columns.loc[self.columns["ordered"], "column"]]

    @property
    def shows_order(self) -> bool:
        """Neighbouring rows more alike than shuffled ones over all columns or in one column
        alone (a file that runs by place, with other columns that do not)."""
        return self.ordered or bool(self.ordered_columns)

    def metrics(self) -> dict[str, float]:
        return {
            "row_order_p_value": self.p_value,
            "row_order_adjacent_similarity": self.adjacent_similarity,
            "row_order_shuffled_similarity": self.shuffled_similarity,
            "rows_ordered": float(self.ordered),
            "row_order_text_gain": self.text_gain,
            "row_order_text_p_value": self.text_p_value,
        }

    def with_text(self, text: TextNeighbours, alpha: float) -> RowOrder:
        """The check with the rows' text seen too: ordered when either part says so."""
        return replace(
            self,
            text_gain=text.gain,
            text_p_value=text.p_value,
            ordered=self.ordered or text.p_value < alpha,
        )


@dataclass(frozen=True)
class TextNeighbours:
    """How much more a copy of the previous row resembles a row than random other rows do."""

    gain: float
    p_value: float


def text_neighbours(
    rows: Sequence[str], seed: int = 0, positions: int = 500, others: int = 10
) -> TextNeighbours:
    """The Levenshtein similarity of each of ``positions`` seeded rows to the row before it,
    minus its mean similarity to ``others`` random rows, with the one-sided Wilcoxon p-value.

    The value-wise check above sees equal values and close numbers, not text that changes a
    little from row to row (a running id written ``P041``, ``P042``); row completion's
    similarity statistic sees that, so a model that copies the previous row would beat random
    rows on such a file. This check measures that gain on the data alone."""
    n = len(rows)
    if n < 3 or positions < 1:
        return TextNeighbours(0.0, 1.0)
    rng = random.Random(seed)
    gains = []
    for t in rng.sample(range(1, n), min(positions, n - 1)):
        previous = rows[t - 1]
        # two more than needed, so that at least one is left once the pair itself is dropped
        drawn = [i for i in rng.sample(range(n), min(others + 2, n)) if i not in (t, t - 1)]
        drawn = drawn[:others]
        random_mean = sum(levenshtein_similarity(previous, rows[i]) for i in drawn) / len(drawn)
        gains.append(levenshtein_similarity(previous, rows[t]) - random_mean)
    return TextNeighbours(float(np.mean(gains)), wilcoxon_greater(gains))


def _encode(column: pd.Series) -> tuple[np.ndarray, bool]:
    """A column as numbers: scaled ranks for numeric columns, category codes otherwise."""
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        return column.rank(pct=True).to_numpy(dtype=float), True
    codes, _ = pd.factorize(column, use_na_sentinel=True)
    return codes.astype(float), False


def _neighbour_similarity(values: np.ndarray, numeric: bool, orders: np.ndarray) -> np.ndarray:
    """Mean similarity of each value to the next one, for each row order in ``orders`` (one
    order per row of that matrix): all shuffles in one array operation."""
    x = values[orders]
    a, b = x[:, :-1], x[:, 1:]
    if not numeric:
        return np.mean(a == b, axis=1)
    missing_a, missing_b = np.isnan(a), np.isnan(b)
    close = 1.0 - np.abs(np.nan_to_num(a) - np.nan_to_num(b))
    similarity = np.where(missing_a | missing_b, (missing_a & missing_b).astype(float), close)
    return np.mean(similarity, axis=1)


def row_order_check(
    frame: pd.DataFrame, permutations: int = 199, seed: int = 0, alpha: float = 0.01
) -> RowOrder:
    """Permutation test of neighbour similarity; ``ordered`` when its p-value is below ``alpha``.

    The p-value is (1 + shuffles at least as alike as the file) / (1 + shuffles), so 199
    shuffles resolve p-values down to 0.005.
    """
    frame = frame.iloc[:MAX_ROWS]
    n = len(frame)
    names = [str(c) for c in frame.columns]
    if n < 3 or not names:
        empty = pd.DataFrame({"column": names, "p_value": 1.0, "ordered": False})
        return RowOrder(1.0, 0.0, 0.0, False, empty)
    encoded = [_encode(frame[c]) for c in frame.columns]
    rng = np.random.default_rng(seed)
    orders = np.array([np.arange(n), *(rng.permutation(n) for _ in range(permutations))])
    step = max(1, CHUNK_VALUES // n)
    sims = np.column_stack(
        [
            np.concatenate(
                [
                    _neighbour_similarity(v, num, orders[i : i + step])
                    for i in range(0, len(orders), step)
                ]
            )
            for v, num in encoded
        ]
    )
    observed, shuffled = sims[0], sims[1:]
    spread = shuffled.std(axis=0, ddof=1)
    z = np.divide(
        observed - shuffled.mean(axis=0), spread, out=np.zeros_like(spread), where=spread > 0
    )
    column_p = stats.norm.sf(z)
    overall = shuffled.mean(axis=1)
    p_value = float((1 + np.sum(overall >= observed.mean())) / (1 + permutations))
    columns = pd.DataFrame(
        {
            "column": names,
            "adjacent_similarity": observed,
            "shuffled_similarity": shuffled.mean(axis=0),
            "p_value": column_p,
            "ordered": column_p < alpha / len(names),
        }
    )
    return RowOrder(
        p_value=p_value,
        adjacent_similarity=float(observed.mean()),
        shuffled_similarity=float(overall.mean()),
        ordered=p_value < alpha,
        columns=columns,
    )
