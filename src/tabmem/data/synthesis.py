"""New rows drawn as a table's own rows are, column after column: the twin's generator.

Each column, in the file's order, is drawn from the real values in one leaf of a regression or
classification tree fitted on the columns before it (CART synthesis, the default of Nowok et
al.'s synthpop): a new row's value is a real row's, chosen among the rows (at least
``LEAF_ROWS``) that agree with the new row on what the tree splits on. So the new rows keep
what trees see of the dependence between columns (an adult Husband is Male, an education's
years go with its name) and the file's spellings, and no column is drawn on its own. A tree
splits only on the earlier columns whose values go with its column's beyond chance: split on
the others, its leaves would hold rows alike in every column so far, and a value drawn there
would complete a copy of a real row, which the twin throws away (most often the rows that
follow the file's rules, leaving a twin that breaks them). A Gaussian copula (the twin's
model before) kept only rank correlations; the blind checks' data-only rules told its rows
from the file's far more often than these (docs/results/twins/blind_rules.md).

What a value brings along is kept out. No real row gives a new row more than one value: each
column's donor is drawn among the rows of its leaf that gave the row nothing yet, so a model
that knows the file's rows and finds the row a value came from learns nothing more of the new
row. A number that names its row (a column of numbers nearly all distinct: adult's six-digit
weights) is moved to a random point between its neighbours in the column and written with the
donor's decimals. A column of words whose values are nearly all distinct (names, tickets),
which a tree cannot split on, is drawn first, from any row: drawn among rows of the new row's
sex and class, a name would tell a model that knows the passenger the row's sex, class and
port. What anyone reads in such a value is kept: a column that the value's sign
(``tabmem.data.signs``: a title) tells in nearly every row (a passenger's sex) is drawn among
the rows of that sign, so a twin's Mr. is male. Counter columns (row numbers) are written as
counts by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tabmem.data.copula import counter_split, table_fingerprint
from tabmem.data.signs import WordSigns
from tabmem.data.values import finite_number, normalize_value
from tabmem.kept import Kept

LEAF_ROWS = 5
"""The fewest real rows a leaf holds: each new value is one of theirs."""

WIDE_SHARE = 0.5
"""A column with more distinct values than this share of its rows names its rows: of words,
it is drawn from any row; of numbers, its values are moved."""

TOLD_SHARE = 0.95
"""A column is told by such a sign where its most common value among the rows of each sign is
the row's value in at least this share of the rows (and its most common value overall is not)."""


DRAWS_PER_VALUE = 20
"""Draws of a donor that already gave the row a value before one is kept anyway (a leaf of
rows that all did)."""

BINS = 10
"""Groups a column's values fall in for the test of association between two columns."""

RELATED_P = 1e-3
"""A tree of a column splits on the columns before it whose association with it has a p-value
below this."""

FITS_KEPT = 8
_FITTED: Kept[RowSynthesis] = Kept(FITS_KEPT)


def _codes(values: Sequence[str]) -> tuple[np.ndarray, bool]:
    """A column as numbers a tree can split: its values where nearly all are numbers (the
    others below the smallest), else the rank of each normalized value; and whether it is
    numeric."""
    normal = [normalize_value(v) for v in values]
    numbers = [finite_number(v) if v else None for v in normal]
    present = [x for x in numbers if x is not None]
    if present and len(present) >= 0.9 * sum(1 for v in normal if v):
        floor = min(present) - 1.0
        return np.array([floor if x is None else x for x in numbers]), True
    ranks = {v: i for i, v in enumerate(sorted(set(normal)))}
    return np.array([float(ranks[v]) for v in normal]), False


_NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)")


def _between(
    column: np.ndarray, values: np.ndarray, texts: list[str], rng: np.random.Generator
) -> tuple[np.ndarray, list[str]]:
    """Each value moved to a random point between it and the column's next values below and
    above (halfway to each), written with the donor text's decimals and spelling: a number of
    the column's kind that names no real row."""
    known = np.unique(column)
    place = np.searchsorted(known, values)
    below = np.where(place > 0, known[np.maximum(place - 1, 0)], values)
    above = np.where(place < len(known) - 1, known[np.minimum(place + 1, len(known) - 1)], values)
    low = values - (values - below) / 2
    high = values + (above - values) / 2
    drawn = low + rng.random(len(values)) * (high - low)
    out_values, out_texts = values.copy(), list(texts)
    for i, (text, value) in enumerate(zip(texts, drawn, strict=True)):
        match = _NUMBER.search(text)
        if match is None:
            continue
        written = match.group(0)
        decimals = len(written.split(".")[1]) if "." in written else 0
        new = f"{value:.{decimals}f}"
        if written.lstrip("-").startswith("."):
            new = new.replace("0.", ".", 1)
        out_texts[i] = text[: match.start()] + new + text[match.end() :]
        out_values[i] = float(new)
    return out_values, out_texts


def _bins(column: np.ndarray) -> np.ndarray:
    """A column as at most ``BINS`` groups for a test of association: its values where they
    are few, else their quantile groups."""
    values, groups = np.unique(column, return_inverse=True)
    if len(values) <= BINS:
        return groups
    edges = np.unique(np.quantile(column, np.linspace(0, 1, BINS + 1)[1:-1]))
    return np.searchsorted(edges, column, side="left")


def _related(groups: list[np.ndarray], column: int, candidates: tuple[int, ...]) -> tuple[int, ...]:
    """The columns of ``candidates`` whose values go with ``column``'s beyond chance (a
    G-test of independence on their ``groups``, ``_bins``, p below ``RELATED_P``): a tree
    also split on the others would cut the rows into leaves that agree on them by chance, and
    a new row's value drawn from such a leaf would come from rows like it in every column so
    far (a copy, which the twin then throws away: rows that follow the file's rules would be
    thrown away most)."""
    from scipy.stats import chi2_contingency

    target = groups[column]
    related = []
    for b in candidates:
        source = groups[b]
        table = np.zeros((source.max() + 1, target.max() + 1))
        np.add.at(table, (source, target), 1)
        table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
        if min(table.shape) < 2:
            continue
        if chi2_contingency(table, lambda_="log-likelihood").pvalue < RELATED_P:
            related.append(b)
    return tuple(related)


def _signs(column: Sequence[str]) -> np.ndarray:
    """Each value's sign in the column (``tabmem.data.signs``: a passenger's title), as a
    code; -1 for none."""
    read = WordSigns.of(column)
    codes: dict[str, int] = {"": -1}
    return np.array([codes.setdefault(read.sign(v), len(codes) - 1) for v in column], float)


def _told(signs: np.ndarray, column: np.ndarray) -> bool:
    """Whether ``signs`` tell the categories ``column`` in nearly every row (``TOLD_SHARE``)
    where nothing else does."""
    values = column.astype(int)
    hits = sum(np.bincount(values[signs == s]).max() for s in np.unique(signs))
    return hits >= TOLD_SHARE * len(values) > np.bincount(values).max()


@dataclass(frozen=True)
class _Tree:
    """One column's tree: the columns it splits on, and its leaves' real rows (``rows`` in
    leaf order, each leaf's ``first`` place there and ``counts``)."""

    tree: Any
    splits: tuple[int, ...]
    leaf_index: dict[int, int]
    rows: np.ndarray
    first: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, tree: Any, splits: tuple[int, ...], codes: np.ndarray) -> _Tree:
        leaves = tree.apply(codes[:, splits])
        ids, counts = np.unique(leaves, return_counts=True)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        order = np.argsort(leaves, kind="stable")
        return cls(tree, splits, {int(i): k for k, i in enumerate(ids)}, order, first, counts)

    def donors(self, drawn: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """For each new row, a real row of the leaf its drawn values fall in."""
        leaf = np.array([self.leaf_index[int(i)] for i in self.tree.apply(drawn[:, self.splits])])
        pick = (rng.random(len(leaf)) * self.counts[leaf]).astype(int)
        return self.rows[self.first[leaf] + pick]


@dataclass(frozen=True)
class RowSynthesis:
    """The fitted trees of a table: for each modelled column after the first, its tree, the
    columns it splits on and the real rows of each of its leaves."""

    width: int
    counters: tuple[int, ...]
    modelled: tuple[int, ...]
    wide: tuple[int, ...]  # near-unique word columns (of the modelled): from any row, first
    renumbered: tuple[int, ...]  # near-unique number columns (of the modelled): new values
    values: tuple[tuple[str, ...], ...]  # each modelled column's raw fields, row by row
    codes: np.ndarray  # rows x modelled columns
    trees: tuple[_Tree | None, ...]

    @classmethod
    def fit(cls, rows: Sequence[Sequence[str]]) -> RowSynthesis:
        """Fit to rows of raw fields; the same rows give the same model, kept from an earlier
        fit."""
        if not rows:
            raise ValueError("a row synthesis needs at least one row to fit")
        return _FITTED.get(table_fingerprint(rows), lambda: cls._fit(rows))

    @classmethod
    def _fit(cls, rows: Sequence[Sequence[str]]) -> RowSynthesis:
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

        width = len(rows[0])
        counters, modelled = counter_split(rows)
        values = tuple(tuple(row[j] for row in rows) for j in modelled)
        encoded = [_codes(column) for column in values]
        codes = np.column_stack([c for c, _ in encoded]) if modelled else np.zeros((len(rows), 0))
        wide = tuple(
            a
            for a, (column, (_, numeric)) in enumerate(zip(values, encoded, strict=True))
            if not numeric and len(set(column)) > WIDE_SHARE * len(rows)
        )
        renumbered = tuple(
            a
            for a, (column, (_, numeric)) in enumerate(zip(values, encoded, strict=True))
            if numeric and len(set(column)) > WIDE_SHARE * len(rows)
        )
        for a in wide:  # drawn first; later trees split on each value's sign
            codes[:, a] = _signs(values[a])
        groups = [_bins(column) for column in codes.T]
        trees: list[_Tree | None] = []
        for a, (_, numeric) in enumerate(encoded):
            earlier = tuple(b for b in range(a) if b not in wide)
            splits = () if a in wide else _related(groups, a, earlier)
            if not numeric and a not in wide:
                splits += tuple(b for b in wide if _told(codes[:, b], codes[:, a]))
            if not splits:
                trees.append(None)
                continue
            kind = DecisionTreeRegressor if numeric else DecisionTreeClassifier
            tree = kind(min_samples_leaf=LEAF_ROWS, random_state=0)
            tree.fit(codes[:, splits], codes[:, a] if numeric else codes[:, a].astype(int))
            trees.append(_Tree.of(tree, splits, codes))
        return cls(
            width,
            counters,
            modelled,
            wide,
            renumbered,
            values,
            codes,
            tuple(trees),
        )

    def sample(self, n: int, rng: np.random.Generator) -> list[list[str]]:
        """``n`` new rows of raw fields (counter columns left empty for the caller), no two
        values of a row from one real row."""
        rows = [[""] * self.width for _ in range(n)]
        drawn = np.zeros((n, len(self.modelled)))
        used = np.full((n, len(self.modelled)), -1)
        rest = (a for a in range(len(self.modelled)) if a not in self.wide)
        for a in (*self.wide, *rest):
            j = self.modelled[a]
            tree = self.trees[a]
            donors = self._donors(tree, drawn, rng)
            for _ in range(DRAWS_PER_VALUE):
                again = (used == donors[:, None]).any(axis=1)
                if not again.any():
                    break
                donors[again] = self._donors(tree, drawn[again], rng)
            used[:, a] = donors
            drawn[:, a] = self.codes[donors, a]
            texts = [self.values[a][donor] for donor in donors]
            if a in self.renumbered:
                drawn[:, a], texts = _between(self.codes[:, a], drawn[:, a], texts, rng)
            for row, text in zip(rows, texts, strict=True):
                row[j] = text
        return rows

    def _donors(
        self, tree: _Tree | None, drawn: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """A real row for each new row: of its leaf, or any where the column has no tree."""
        if tree is None:
            return rng.integers(0, len(self.codes), size=len(drawn))
        return tree.donors(drawn, rng)

    def describe(self) -> dict:
        """The fitted model as plain data, for the run's record."""
        return {
            "model": "sequential trees: each column drawn from the real values of a leaf of a "
            "tree on the columns before it (CART synthesis)",
            "counter_columns": list(self.counters),
            "leaf_rows": LEAF_ROWS,
            "from_any_row": [self.modelled[a] for a in self.wide],
            "new_numbers": [self.modelled[a] for a in self.renumbered],
            "leaves": [0 if t is None else len(t.counts) for t in self.trees],
            "split_on": [
                [] if t is None else [self.modelled[b] for b in t.splits] for t in self.trees
            ],
        }
