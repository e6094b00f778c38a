"""Contrast rows for Min-K% Prob: a real row with some of its values taken from a similar row,
so that only a model that has read the rows can tell which of the two is real.

Why: a contrast made by editing values (moving a number's last digit) breaks the column's
format (``4074.0`` -> ``4074.1`` where every value ends in ``.0``, ``0`` -> ``1`` in a sparse
count, 40 hours -> 39) and any language model finds it less likely, memory or not. Here every
replaced value is another row's value of the same column, written exactly as that row writes
it, so formats hold by construction. A block of columns S is chosen at random and the donor is
drawn among the ``pool`` rows nearest to the real row on the other columns, so the donor's S
values are a draw of S given the rest of the row, as the real row's own values are: the real
row and its contrast are two draws of the same kind (one step of a Gibbs sampler, which is
reversible), and without memory which one is real is a coin flip. Columns of which one
determines the other (``Education`` and ``EducationNum``) move together; row counters and other
columns that follow the file's order (``PassengerId``) neither move nor count in the distance.
A pair whose donor brings the very values of the real row is dropped, never redrawn: redrawing
until the values differ would give common real values rare replacements, and the real rows
would look more typical than their contrasts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from tabmem.data.csvtext import raw_fields
from tabmem.data.values import finite_number, normalize_value

MAX_SHARE_OF_DISTINCT = 0.2
"""A column determines another only if it repeats its values (at most this share distinct)."""


def _follows_file_order(values: Sequence[str]) -> bool:
    """Whether a column's numbers rise (or fall) strictly from row to row: a row's position."""
    numbers = [finite_number(v) for v in values]
    if len(numbers) < 2 or any(n is None for n in numbers):
        return False
    steps = np.diff(np.asarray(numbers, dtype=float))
    return bool(np.all(steps > 0) or np.all(steps < 0))


@dataclass(frozen=True)
class Contrast:
    """A contrast row's text, the 0-based index of its donor row and the columns it took."""

    text: str
    donor: int
    columns: tuple[int, ...]


class ContrastTable:
    """The rows of a file as fields and distances, ready to build contrast rows."""

    def __init__(self, rows: Sequence[str], delimiter: str, n_columns: int) -> None:
        self.delimiter = delimiter
        fields = [raw_fields(row, delimiter) for row in rows]
        self.valid = np.array([len(f) == n_columns for f in fields], dtype=bool)
        self.fields = [f if len(f) == n_columns else [""] * n_columns for f in fields]
        values = [[normalize_value(f[j]) for f in self.fields] for j in range(n_columns)]
        self.ordered = tuple(
            j
            for j in range(n_columns)
            if _follows_file_order([v for v, ok in zip(values[j], self.valid, strict=True) if ok])
        )
        self.codes = np.stack([self._codes(v) for v in values], axis=1)
        self.ranks = np.stack([self._ranks(v) for v in values], axis=1)
        self.blocks = self._blocks()

    @staticmethod
    def _codes(values: list[str]) -> np.ndarray:
        index: dict[str, int] = {}
        return np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int64)

    @staticmethod
    def _ranks(values: list[str]) -> np.ndarray:
        """Ranks scaled to [0, 1] for a numeric column (missing: NaN); all NaN for text."""
        numbers = [finite_number(v) if v != "" else None for v in values]
        present = [n for n in numbers if n is not None]
        if not present or any(n is None and v != "" for n, v in zip(numbers, values, strict=True)):
            return np.full(len(values), np.nan)
        out = np.full(len(values), np.nan)
        where = np.array([n is not None for n in numbers])
        out[where] = rankdata(np.asarray(present, dtype=float)) / len(present)
        return out

    def _determines(self, a: int, b: int, distinct: Sequence[int]) -> bool:
        """Whether column ``a`` repeats its values and each of them comes with one ``b``."""
        codes = self.codes[self.valid]
        if distinct[a] > MAX_SHARE_OF_DISTINCT * len(codes) or distinct[b] < 2:
            return False
        joint = codes[:, a] * (int(codes[:, b].max()) + 1) + codes[:, b]
        return len(np.unique(joint)) == distinct[a]

    def _blocks(self) -> list[tuple[int, ...]]:
        """Columns that may move, grouped so that a column moves with those it determines or
        that determine it; columns with a single value or in file order are left out."""
        n_columns = self.codes.shape[1]
        codes = self.codes[self.valid]
        distinct = [len(np.unique(codes[:, j])) for j in range(n_columns)]
        movable = [j for j in range(n_columns) if j not in self.ordered and distinct[j] > 1]
        parent = {j: j for j in movable}

        def root(j: int) -> int:
            while parent[j] != j:
                j = parent[j]
            return j

        for a in movable:
            for b in movable:
                if a != b and self._determines(a, b, distinct):
                    parent[root(a)] = root(b)
        groups: dict[int, list[int]] = {}
        for j in movable:
            groups.setdefault(root(j), []).append(j)
        return sorted(tuple(g) for g in groups.values())

    def distances(self, index: int, columns: Sequence[int]) -> np.ndarray:
        """Each row's distance to row ``index`` on ``columns``: |rank difference| for numbers,
        0 or 1 for text and for a value missing in one row only."""
        total = np.zeros(len(self.fields))
        for j in columns:
            ranks = self.ranks[:, j]
            if np.isnan(ranks).all():
                total += self.codes[:, j] != self.codes[index, j]
                continue
            own = ranks[index]
            if np.isnan(own):
                total += ~np.isnan(ranks)
            else:
                total += np.where(np.isnan(ranks), 1.0, np.abs(ranks - own))
        return total

    def contrast(
        self,
        index: int,
        fraction: float,
        pool: int,
        rng: np.random.Generator,
        eligible: np.ndarray | None = None,
    ) -> Contrast | None:
        """Row ``index`` with a share ``fraction`` of its column blocks (at least one, and one
        left) taken from a donor among the ``pool`` rows nearest on the other columns (among
        the ``eligible`` rows when a mask is given); None when the row is malformed, fewer
        than two blocks vary, or no donor brings other values. Donors that equal the row on
        every other column are passed over: the contrast would be the donor itself, a real
        row."""
        if not self.valid[index] or len(self.blocks) < 2:
            return None
        count = min(len(self.blocks) - 1, max(1, round(fraction * len(self.blocks))))
        chosen = rng.choice(len(self.blocks), size=count, replace=False)
        moved = tuple(sorted(j for b in chosen for j in self.blocks[int(b)]))
        matched = [
            j for j in range(self.codes.shape[1]) if j not in moved and j not in self.ordered
        ]
        other = np.any(self.codes[:, matched] != self.codes[index, matched], axis=1)
        allowed = self.valid & other if eligible is None else self.valid & other & eligible
        candidates = np.flatnonzero(allowed)
        if candidates.size == 0:
            return None
        distance = self.distances(index, matched)[candidates]
        nearest = candidates[np.lexsort((rng.random(candidates.size), distance))][:pool]
        donor = int(rng.choice(nearest))
        own, theirs = self.fields[index], self.fields[donor]
        if all(own[j] == theirs[j] for j in moved):
            return None
        fields = [theirs[j] if j in moved else v for j, v in enumerate(own)]
        return Contrast(self.delimiter.join(fields), donor, moved)
