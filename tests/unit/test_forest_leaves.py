"""The forest learner walks all its trees at once; each leaf must be scikit-learn's."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from tabmem.llm.oracle.forest import ForestModel, _Fit
from tabmem.stats.neighbours import Column


@pytest.mark.parametrize("forest", [RandomForestClassifier, RandomForestRegressor])
def test_query_leaves_equal_sklearns_apply_with_missing_values(forest):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 4)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    y = (np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 1]) > 0).astype(int)
    model = forest(n_estimators=20, max_depth=6, random_state=0).fit(x, y)
    fit = _Fit.grown(np.arange(400), (0, 1, 2, 3), model.estimators_, model.apply(x))
    queries = rng.normal(size=(200, 4)).astype(np.float32)
    queries[rng.random(queries.shape) < 0.2] = np.nan
    queries[:50] = x[:50]  # values on the thresholds' sides exactly as fitted
    for query in queries:
        row = query[None, :]
        expected = [tree.apply(row, check_input=False)[0] for tree in model.estimators_]
        assert fit.query_leaves(row).tolist() == expected


def test_weights_share_each_trees_vote_among_the_allowed_rows_of_the_querys_leaf():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(int)
    model = RandomForestClassifier(n_estimators=10, max_depth=4, random_state=0).fit(x, y)
    leaves = model.apply(x)
    fit = _Fit.grown(np.arange(300), (0, 1, 2), model.estimators_, leaves)
    allowed = rng.random(300) < 0.7
    query = x[:1]
    # the quantile-forest reading, written out: per tree, one vote shared by the allowed
    # rows in the query's leaf
    expected = np.zeros(300)
    for t, leaf in enumerate(model.apply(query)[0]):
        same = (leaves[:, t] == leaf) & allowed
        if same.any():
            expected[same] += 1.0 / same.sum()
    expected /= expected.sum()
    # exactly: a row's shares are added in the trees' order, whatever gathers them
    assert np.array_equal(fit.weights(query, allowed), expected)
    assert fit.weights(query, allowed)[~allowed].sum() == 0.0


def test_the_most_likely_value_and_row_follow_the_tie_rules():
    column = Column.of(["b", "a", "b", "a", "c", "c", "c"])
    rows = np.arange(7)
    allowed = np.array([True, True, True, True, True, True, False])
    # a: 0.3 + 0.3, b: 0.2 + 0.4, c: 0.6 over one allowed row: a, b and c tie on weight;
    # a and b are more frequent than c; b beats a by the value's order; within b the row
    # that weighs most (row 2)
    weights = np.array([0.2, 0.3, 0.4, 0.3, 0.6, 0.0, 0.0])
    assert ForestModel._most_likely(column, rows, weights, allowed) == 2
    weights = np.array([0.3, 0.3, 0.3, 0.3, 0.0, 0.0, 0.0])
    assert ForestModel._most_likely(column, rows, weights, allowed) == 0  # first of equals
    # the fit's rows in another order: position 5 is row 1 ("a"); position 6 (row 0, "b",
    # the heaviest) is not allowed
    weights = np.array([0.0, 0.1, 0.0, 0.0, 0.0, 0.3, 0.9])
    assert ForestModel._most_likely(column, rows[::-1], weights, allowed) == 1
