"""The forest learner: a hard negative of a model family that no data-only baseline uses.

``ForestOracle`` is the learner (``tabmem.llm.oracle.learner``) with its nearest-neighbour
model replaced by random forests: formats, CSV continuation, counters, options and names are
the learner's; the distribution of one value given the others comes from a forest per asked
column (scikit-learn's ``RandomForestClassifier`` for text or a column of at most 30 values,
``RandomForestRegressor`` for a measurement; 50 trees of depth 10 at most) fitted on the
columns the prompt shows.

It never knows the row it is asked about, by cross-fitting (``tabmem.stats.crossfit``):
each forest is fitted once per fold, on the rows of the other folds, and a query is answered
by the forest of the fold that holds out its asked row.

A forest's conditional distribution is read through its leaves, as a quantile regression
forest does: each training row of the fold weighs, summed over the trees, one over the size
of the query's leaf when it falls in that leaf. Every asked row (all the rows a CSV prompt's
answer reaches, every row agreeing with what is shown) weighs nothing, so a value that only
they hold is never written, whichever fold's trees saw them. The answer is a training row's
raw field, so numbers keep the file's exact spelling: at temperature 0 the value with the most
weight (for a measurement, the training value nearest to the weighted mean, or an empty field
when empty fields weigh most); above it, a training row drawn by its weight. A field cut short
that no training row finishes stays as typed.
"""

from __future__ import annotations

import math
import random
import threading
import warnings
import zlib
from collections import Counter, OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from tabmem.data.values import normalize_value
from tabmem.kept import Kept
from tabmem.llm.oracle.learner import ConditionalModel, LearnerOracle, _Knowledge
from tabmem.llm.oracle.models import _Table
from tabmem.stats.crossfit import FOLDS, CrossFitted, stable_seed
from tabmem.stats.draws import weighted_index
from tabmem.stats.kernel import TINY, Kernel
from tabmem.stats.likelihood import Triple, weighted_moments
from tabmem.stats.neighbours import Column

TREES = 50
FIT_BUDGET = 384 * 2**20
"""Bytes of fitted forests a model keeps, the most recently used (``_Fit.nbytes``: 0.06 MB a
fit on iris, 0.25 on titanic, 0.7 on adult). Prompts showing new sets of columns keep asking
for new fits; kept 48 at a time, one seed of titanic's power job (three shares) grew 1,815
forests, 240 of them distinct (114 CPU s against 28 with all kept). Adult's calibration jobs
ask about 30 new fits a seed and a seed's default and papers' jobs about 220 in all: with
2.7 MB a fit, 384 MB kept 149 and every seed refitted about 200."""
MAX_DEPTH = 10
MIN_LEAF = 3
FEATURE_SHARE = 0.5
"""The share of the shown columns each split may choose from."""
BOOTSTRAP_ROWS = 1000
"""Each tree is grown on a bootstrap sample of at most this many rows (fits stay fast)."""
SPLIT_CLASSES = 30
"""A classifier splits on its column's 30 most frequent values; the rarer share one class
(its answers still read every value off the leaves' rows)."""
SMOOTHING = 0.01
"""An option's value probability is mixed with 1 % of its add-one frequency among the rows."""


@dataclass(frozen=True)
class _Fit:
    """One column's forest on one fold: the rows it was fitted on, its trees' nodes and the
    rows each leaf holds. The nodes are copied out of scikit-learn's trees, which are then
    dropped (a classifier's trees hold a value per node and class: megabytes a forest on
    adult); the leaves' rows are two flat arrays, not a dict of arrays per tree (which held
    three times the bytes), so that more fits stay kept (``FIT_BUDGET``)."""

    rows: np.ndarray
    columns: tuple[int, ...]
    nodes: tuple[np.ndarray, ...]
    """Every tree's nodes side by side (trees × nodes, padded with leaves): left and right
    child, split feature, threshold, and where a missing value goes; () without a forest."""
    members: np.ndarray | None
    """Per tree, the positions among ``rows`` ordered by leaf, in their order within a leaf
    (trees × rows); None: no forest, every row weighs the same."""
    starts: np.ndarray | None
    """Per tree, where each node's rows begin in ``members`` (trees × nodes + 1): the rows of
    leaf ``n`` of tree ``t`` are ``members[t, starts[t, n] : starts[t, n + 1]]``."""

    @classmethod
    def grown(
        cls, rows: np.ndarray, columns: tuple[int, ...], trees: Sequence[Any], leaves: np.ndarray
    ) -> _Fit:
        """The fit of scikit-learn's fitted ``trees`` (a forest's ``estimators_``) and each
        row's leaf in each tree (rows × trees, as the forest's ``apply`` gives them)."""
        structures = [tree.tree_ for tree in trees]
        width = max(t.node_count for t in structures)

        def stack(field: str, fill: float, dtype: type) -> np.ndarray:
            out = np.full((len(structures), width), fill, dtype=dtype)
            for i, t in enumerate(structures):
                out[i, : t.node_count] = getattr(t, field)
            return out

        nodes = (
            stack("children_left", -1, np.int32),
            stack("children_right", -1, np.int32),
            np.maximum(stack("feature", 0, np.int32), 0),  # a leaf's feature is -2
            stack("threshold", 0.0, np.float64),
            stack("missing_go_to_left", 1, np.bool_),
        )
        position = np.int16 if rows.size < 2**15 else np.int32
        by_tree = np.ascontiguousarray(leaves.T)
        members = np.argsort(by_tree, axis=1, kind="stable").astype(position)
        starts = np.stack(
            [np.searchsorted(np.sort(tree), np.arange(width + 1)) for tree in by_tree]
        ).astype(position)
        return cls(rows, columns, nodes, members, starts)

    @property
    def nbytes(self) -> int:
        """The bytes the fit's arrays hold."""
        arrays = [self.rows, *self.nodes, self.members, self.starts]
        return sum(a.nbytes for a in arrays if a is not None)

    @cached_property
    def _flat_nodes(self) -> tuple[np.ndarray, ...]:
        """``nodes`` with the trees laid end to end: node ``n`` of tree ``t`` at
        ``t * width + n`` (one-dimensional takes are faster than a gather over two axes)."""
        return tuple(a.ravel() for a in self.nodes)

    def query_leaves(self, x: np.ndarray) -> np.ndarray:
        """The leaf of the one-row query ``x`` (float32, as the trees were fitted) in each
        tree: scikit-learn's ``apply`` walked in all trees at once, a level per step (one
        Python call per tree cost more than the rest of a forest answer)."""
        left, right, feature, threshold, missing_left = self._flat_nodes
        n_trees, width = self.nodes[0].shape
        start = np.arange(n_trees, dtype=np.int64) * width
        node = np.zeros(n_trees, dtype=np.int64)
        while True:
            at = start + node
            down_left = left[at]
            inner = down_left >= 0
            if not inner.any():
                return node
            value = x[0, feature[at]].astype(np.float64)
            go_left = np.where(np.isnan(value), missing_left[at], value <= threshold[at])
            node = np.where(inner, np.where(go_left, down_left, right[at]), node)

    def weights(self, x: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """Each row's weight for the query ``x`` (summing to 1 over the ``allowed`` rows);
        uniform over them when no tree puts an allowed row in the query's leaf. A row's
        shares are added tree by tree, in the trees' order (``np.bincount`` adds in the
        order of its input), so the weights do not depend on how they are gathered."""
        weights = np.zeros(self.rows.size)
        if self.members is not None and self.starts is not None:
            trees = np.arange(self.members.shape[0])
            leaves = self.query_leaves(x)
            begin = self.starts[trees, leaves].astype(np.int64)
            sizes = self.starts[trees, leaves + 1] - begin
            total = int(sizes.sum())
            if total:
                # the members of every tree's leaf, tree after tree, as one gather
                offset = np.repeat(
                    trees * self.members.shape[1] + begin - np.cumsum(sizes) + sizes, sizes
                )
                row = self.members.ravel()[offset + np.arange(total)].astype(np.int64)
                tree = np.repeat(trees, sizes)
                keep = allowed[row]
                row, tree = row[keep], tree[keep]
                if row.size:
                    share = 1.0 / np.bincount(tree)[tree]
                    weights = np.bincount(row, weights=share, minlength=self.rows.size)
        if weights.sum() <= 0:
            weights = allowed.astype(float)
        total_weight = weights.sum()
        return weights / total_weight if total_weight > 0 else weights


class ForestModel(CrossFitted):
    """A table's conditional distributions (rows of value strings) by cross-fitted random
    forests; the same reading as ``NeighbourModel`` (``pick``, ``choice_scores``)."""

    def __init__(self, rows: Sequence[Sequence[str]], name: str, folds: int = FOLDS) -> None:
        super().__init__(rows, name, folds)
        self._fits: OrderedDict[tuple[int, int, tuple[int, ...]], _Fit] = OrderedDict()
        self._fit_bytes = 0
        self._lock = threading.Lock()

    def _fit(self, fold: int, target: int, columns: tuple[int, ...]) -> _Fit:
        """The forest of column ``target`` on ``columns``, fitted on the rows outside ``fold``."""
        key = (fold, target, columns)
        with self._lock:
            if key in self._fits:
                self._fits.move_to_end(key)
                return self._fits[key]
            fit = self._fits[key] = self._grow(fold, target, columns)
            self._fit_bytes += fit.nbytes
            while self._fit_bytes > FIT_BUDGET and len(self._fits) > 1:
                self._fit_bytes -= self._fits.popitem(last=False)[1].nbytes
            return fit

    def _grow(self, fold: int, target: int, columns: tuple[int, ...]) -> _Fit:
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        rows = self.training(fold)
        column = self.columns[target]
        x = np.ascontiguousarray(self.features[np.ix_(rows, list(columns))])
        if column.discrete:
            codes = column.codes[rows]
            frequent = [c for c, _ in Counter(codes.tolist()).most_common(SPLIT_CLASSES)]
            y = np.where(np.isin(codes, frequent), codes, -1)
            fitted = np.ones(rows.size, dtype=bool)
            forest: Any = RandomForestClassifier
        else:
            assert column.numbers is not None
            y = column.numbers[rows]
            fitted = ~np.isnan(y)
            forest = RandomForestRegressor
        if not columns or fitted.sum() < 2:
            return _Fit(rows, columns, (), None, None)
        model = forest(
            n_estimators=TREES,
            max_depth=MAX_DEPTH,
            min_samples_leaf=MIN_LEAF,
            max_features=FEATURE_SHARE,
            max_samples=min(1.0, BOOTSTRAP_ROWS / int(fitted.sum())),
            n_jobs=1,
            random_state=stable_seed(self.name, fold, target, columns),
        )
        with warnings.catch_warnings():
            # a column of names has about as many classes as rows: still a classification
            warnings.filterwarnings("ignore", "The number of unique classes", UserWarning)
            model.fit(x[fitted], y[fitted])
        return _Fit.grown(rows, columns, model.estimators_, model.apply(x).astype(np.int32))

    def _query(
        self, target: int, given: Mapping[int, str], asked: Collection[int], fold: int
    ) -> tuple[_Fit, np.ndarray]:
        """The fold's forest for ``target`` given the usable ``given`` values, and its rows
        that may carry weight (the ``asked`` rows may not)."""
        columns = tuple(sorted(j for j in given if j != target))
        fit = self._fit(fold, target, columns)
        allowed = ~np.isin(fit.rows, list(asked))
        return fit, allowed

    def _weights(self, fit: _Fit, given: Mapping[int, str], allowed: np.ndarray) -> np.ndarray:
        x = np.array([[self.feature(j, given[j]) for j in fit.columns]], dtype=np.float32)
        return fit.weights(x, allowed)

    def pick(
        self,
        target: int,
        given: Mapping[int, str],
        rng: random.Random | None = None,
        exclude: Collection[int] = (),
        protect: bool = True,
        among: np.ndarray | None = None,
    ) -> int | None:
        """A row whose value of column ``target`` is the answer, chosen ``among`` a mask of
        rows (default all): without ``rng`` the most likely value (a measurement: the value
        nearest to the weighted mean), with ``rng`` a row drawn by its weight. None when no
        row of the fold's forest may answer."""
        given, asked, fold = self.question(target, given, exclude, protect)
        fit, allowed = self._query(target, given, asked, fold)
        if among is not None:
            allowed &= among[fit.rows]
        if not allowed.any():
            return None
        weights = self._weights(fit, given, allowed)
        if rng is not None:
            return int(fit.rows[weighted_index(rng, weights)])
        column = self.columns[target]
        if column.discrete:
            return self._most_likely(column, fit.rows, weights, allowed)
        numbers = column.numbers[fit.rows] if column.numbers is not None else None
        assert numbers is not None
        present = allowed & ~np.isnan(numbers)
        if not present.any() or weights[allowed & ~present].sum() * 2 > 1:
            return int(fit.rows[np.flatnonzero(allowed & ~present)[0]])
        mass = weights[present]
        points = numbers[present]
        mean = float(mass @ points / mass.sum()) if mass.sum() > 0 else float(points.mean())
        gaps = np.where(present, np.abs(numbers - mean), np.inf)
        return int(fit.rows[int(np.argmin(gaps))])

    @staticmethod
    def _most_likely(
        column: Column, rows: np.ndarray, weights: np.ndarray, allowed: np.ndarray
    ) -> int:
        """The allowed row, of the value with the most weight (ties: the more frequent among
        the allowed rows, then the value's order), that weighs most (ties: the first). A
        value's weight is summed over its rows in their order, as ``np.bincount`` adds."""
        held = np.flatnonzero(allowed)
        codes = column.codes[rows[held]]
        tally = np.bincount(codes, weights=weights[held], minlength=len(column.book))
        count = np.bincount(codes, minlength=len(column.book))
        names = column.names
        best = max(np.flatnonzero(count).tolist(), key=lambda c: (tally[c], count[c], names[c]))
        holders = held[codes == best]
        return int(rows[holders[int(np.argmax(weights[holders]))]])

    def choice_scores(
        self,
        options: Sequence[Mapping[int, str]],
        scored: Sequence[Collection[int]],
        exclude: Collection[int] = (),
    ) -> list[float]:
        """Each option's log-likelihood: the sum, over its ``scored`` columns, of the value's
        log probability given the option's other values. The rows agreeing with every value
        all options share are the record asked about: their fold answers, and they weigh
        nothing when at most ``k`` of them do."""
        usable, asked, fold = self.options_asked(options, exclude)
        return [
            sum(self._log_score(j, values, asked, fold) for j in mine if j in values)
            for values, mine in zip(usable, scored, strict=True)
        ]

    def _log_score(
        self, target: int, record: Mapping[int, str], asked: Collection[int], fold: int
    ) -> float:
        """log probability (a measurement: log density) of ``record[target]`` given the
        record's other values, by the fold's forest."""
        given = {j: v for j, v in record.items() if j != target}
        return self.triple(target, record[target], given, asked, fold, moments=False)[0]

    def triple(
        self,
        target: int,
        value: str,
        given: Mapping[int, str],
        asked: Collection[int],
        fold: int,
        width: float | None = None,
        moments: bool = True,
    ) -> Triple:
        """log P(``value`` in column ``target`` | ``given``) by the fold's forest, with the
        mean and sd of log P over the same conditional distribution (0 and 0 without
        ``moments``). A category: the leaves' weight of the value mixed with ``SMOOTHING`` of
        its add-one frequency among the allowed rows, the moments exact over the values held.
        A measurement: the forest-weighted kernel density (``Kernel``); with ``width`` (its
        last digit's), the probability of its written precision, at most 1."""
        fit, allowed = self._query(target, given, asked, fold)
        if not allowed.any():
            return TINY_LOG, TINY_LOG, 0.0
        weights = self._weights(fit, given, allowed)
        column = self.columns[target]
        number = self.number(target, value)
        if column.discrete or math.isnan(number):
            codes = column.codes[fit.rows]
            holders = (codes == column.book.get(normalize_value(value), -1)) & allowed
            distinct = np.unique(codes[allowed]).size
            prior = (holders.sum() + 1) / (allowed.sum() + distinct + 1)
            score = math.log((1 - SMOOTHING) * float(weights[holders].sum()) + SMOOTHING * prior)
            if not moments:
                return score, 0.0, 0.0
            held = codes[allowed]
            count = np.bincount(held, minlength=len(column.book))
            chance = np.bincount(held, weights=weights[allowed], minlength=len(column.book))
            seen = count > 0
            probs = (
                (1 - SMOOTHING) * chance + SMOOTHING * (count + 1) / (allowed.sum() + distinct + 1)
            )[seen]
            return score, *weighted_moments(np.log(probs), probs / probs.sum())
        numbers = column.numbers[fit.rows] if column.numbers is not None else np.array([])
        present = allowed & ~np.isnan(numbers)
        if not present.any() or weights[present].sum() <= 0:
            return TINY_LOG, TINY_LOG, 0.0
        share = weights[present] / weights[present].sum()
        kernel = Kernel.of(numbers[present], share, column.span)
        offset, cap = (0.0, math.inf) if width is None else (math.log(width), 0.0)
        score = min(kernel.log_density(number) + offset, cap)
        return (score, *kernel.log_moments(offset, cap)) if moments else (score, 0.0, 0.0)


TINY_LOG = math.log(TINY)
"""The log-probability of a value no allowed row makes possible."""
KEPT_MODELS = 8
"""Files whose forests a process keeps for every forest oracle: the partial memorizers of a
calibration job (one per share) and the next seed's job on the file ask the same forests."""
_MODELS: Kept[ForestModel] = Kept(KEPT_MODELS)


def shared_forest_model(table: _Table) -> ForestModel:
    """The file's cross-fitted forests, one per file text in this process. A fit depends on its
    file, fold, column and shown columns alone (seeded by them), so every oracle may share it:
    the three forest rests of a power job refitted the same forests each."""
    key = (table.dataset.name, zlib.crc32(table.text.encode()))
    return _MODELS.get(key, lambda: ForestModel(table.clean_rows, table.dataset.name))


class ForestOracle(LearnerOracle):
    """Knows each dataset's joint distribution through cross-fitted random forests, never the
    rows it is asked about."""

    model_name = "oracle-forest"
    version = "1"

    def _model(self, table: _Table) -> ConditionalModel:
        """The table's cross-fitted forests (each fitted on first use, shared in the process)."""
        return shared_forest_model(table)

    @staticmethod
    def _unpicked(known: _Knowledge, column: int, among: np.ndarray | None, prefix: str) -> str:
        """A field no training row of the answering fold finishes stays as typed."""
        return prefix
