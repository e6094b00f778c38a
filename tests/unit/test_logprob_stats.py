"""The statistics of the log-probability tests, pinned by hand-computable values."""

import math
import random

import numpy as np
import pytest

from tabmem.stats.auc import auc
from tabmem.stats.min_k import min_k_score
from tabmem.stats.order_structure import adjacency, block_order, row_features
from tabmem.stats.permutation import add_one_p_value, paired_sign_test, rank_against_null


def test_auc_counts_ordered_pairs_and_half_ties():
    assert auc([3, 4], [1, 2]) == 1.0
    assert auc([1, 2], [3, 4]) == 0.0
    # pairs (2 vs 1) win, (2 vs 2) tie, (0 vs 1) lose, (0 vs 2) lose: (1 + 0.5) / 4
    assert auc([2, 0], [1, 2]) == pytest.approx(0.375)
    assert auc([5], [5]) == 0.5


def test_auc_needs_both_samples():
    with pytest.raises(ValueError):
        auc([], [1.0])


def test_add_one_p_value():
    assert add_one_p_value(10, [1, 2, 3]) == pytest.approx(1 / 4)
    assert add_one_p_value(2, [1, 2, 3]) == pytest.approx(3 / 4)  # ties count against
    assert add_one_p_value(0, []) == 1.0


def test_rank_against_null_reports_mean_and_sd():
    result = rank_against_null(5.0, [1.0, 2.0, 3.0])
    assert result.p_value == pytest.approx(0.25)
    assert result.null_mean == pytest.approx(2.0)
    assert result.null_sd == pytest.approx(1.0)
    assert result.n_permutations == 3


def test_paired_sign_test_counts_pairs_and_uses_the_exact_binomial_tail():
    # 5 wins, 2 losses, 1 tie: P(X >= 5) for X ~ Binomial(7, 1/2) = (21 + 7 + 1) / 128
    result = paired_sign_test([2, 2, 2, 2, 2, 0, 0, 1], [1, 1, 1, 1, 1, 1, 1, 1])
    assert (result.wins, result.losses, result.ties) == (5, 2, 1)
    assert result.win_rate == pytest.approx(5 / 7)
    assert result.p_value == pytest.approx(29 / 128)


def test_paired_sign_test_keeps_the_pairing():
    # Each real row beats its own contrast by a little and rows differ by a lot: the unpaired
    # AUC stays near 0.5 (78 of 144), the pairs say that every real row wins.
    real = [float(i) + 0.5 for i in range(12)]
    other = [float(i) for i in range(12)]
    assert auc(real, other) == pytest.approx(78 / 144)
    result = paired_sign_test(real, other)
    assert (result.wins, result.win_rate) == (12, 1.0)
    assert result.p_value == pytest.approx(0.5**12)


def test_paired_sign_test_all_ties_and_bad_input():
    result = paired_sign_test([1.0, 2.0], [1.0, 2.0])
    assert (result.win_rate, result.p_value, result.ties) == (0.5, 1.0, 2)
    with pytest.raises(ValueError):
        paired_sign_test([1.0], [1.0, 2.0])


def test_min_k_score_averages_the_lowest_tokens():
    logprobs = [-0.1, -5.0, -0.2, -3.0, -0.3]
    assert min_k_score(logprobs, 20) == pytest.approx(-5.0)  # ceil(1.0) = 1 token
    assert min_k_score(logprobs, 40) == pytest.approx(-4.0)  # ceil(2.0) = 2 tokens
    assert min_k_score(logprobs, 100) == pytest.approx(sum(logprobs) / 5)
    assert min_k_score([-1.0], 1) == -1.0
    with pytest.raises(ValueError):
        min_k_score([], 20)


def test_adjacency_by_hand():
    features = row_features([["1", "a"], ["2", "a"], ["3", "b"], ["4", "b"]])
    # sorted: numeric jumps 1/3 x3, text changes 0,1,0 -> mean of six values = 2/6
    assert adjacency(features, [0, 1, 2, 3]) == pytest.approx(-1 / 3)
    # 0,2,1,3: numeric 2/3,1/3,2/3; text 1,1,1 -> (5/3 + 3) / 6
    assert adjacency(features, [0, 2, 1, 3]) == pytest.approx(-(5 / 3 + 3) / 6)
    assert math.isclose(adjacency(features, [0]), 0.0)


def test_block_order_finds_one_sorted_column_among_shuffled_ones():
    rng = random.Random(0)
    noisy = [[str(rng.random()), rng.choice("abc"), str(rng.randint(0, 9))] for _ in range(24)]
    sorted_id = [[str(i), *row] for i, row in enumerate(noisy)]
    ordered = block_order(row_features(sorted_id), 999, seed=0)
    assert ordered.bonferroni_p == pytest.approx(4 / 1000)
    assert ordered.column_p[0] == pytest.approx(1 / 1000)  # the id, smoothest possible
    assert block_order(row_features(noisy), 999, seed=0).bonferroni_p > 0.05
    assert block_order(row_features([["1"], ["2"]]), 99, seed=0).bonferroni_p == 1.0


def test_block_order_names_columns_and_sees_weak_signals_spread_over_columns():
    features = row_features([["a", "1", "x"], ["b", "2", "y"], ["c", "3", "z"]])
    assert features.columns == (1, 0, 2)  # numeric columns first, then text columns
    rng = np.random.default_rng(5)
    # Four columns, each a little smoother than chance (a noisy trend): the mean over
    # columns shows the drift more clearly than any one column does.
    rows = [[f"{i / 24 + rng.normal(0, 0.6):.3f}" for _ in range(4)] for i in range(24)]
    order = block_order(row_features(rows), 1999, seed=0)
    assert order.overall_p < order.column_p.min()
