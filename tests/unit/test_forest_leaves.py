"""The forest learner walks all its trees at once; each leaf must be scikit-learn's."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from tabmem.llm.oracle.forest import _Fit


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
    assert np.allclose(fit.weights(query, allowed), expected)
    assert fit.weights(query, allowed)[~allowed].sum() == 0.0
