"""Forecast errors, block intervals and the cutoff shift test, pinned by hand-computed values."""

import math

import numpy as np
import pytest

from tabmem.stats.forecast import (
    block_bootstrap_interval,
    block_means,
    parse_forecast,
    robust_relative_error,
    shift_test,
)


@pytest.mark.parametrize(
    ("text", "date", "expected"),
    [
        ("23.45", "", 23.45),
        ("value = 1,234.5", "", 1234.5),
        ("1990-01-02: 22.1", "1990-01-02", 22.1),
        ("-0.5 dollars", "", -0.5),
        ("about 80 (maybe 81)", "", 80.0),
        ("I cannot know that.", "", None),
        ("", "", None),
    ],
)
def test_parse_forecast_reads_the_first_number_after_removing_the_date(text, date, expected):
    assert parse_forecast(text, date) == expected


def test_robust_relative_error_is_capped_and_handles_a_true_zero():
    forecast = [101.0, 100.0, 90.0, 0.0, 5.0, 99.5]
    truth = [100.0, 100.0, 100.0, 0.0, 0.0, 100.0]
    errors = robust_relative_error(forecast, truth, cap=0.02)
    assert errors == pytest.approx([0.01, 0.0, 0.02, 0.0, 0.02, 0.005])


def test_a_missing_forecast_has_no_error():
    errors = robust_relative_error([np.nan, 100.0], [100.0, 100.0], cap=0.02)
    assert math.isnan(errors[0]) and errors[1] == 0.0


def test_block_means_split_into_near_equal_consecutive_blocks():
    assert block_means([1, 2, 3, 4, 5, 6], 2).tolist() == [1.5, 3.5, 5.5]
    assert block_means([1, 2, 3, 4, 5, 6], 4).tolist() == [2.0, 5.0]
    assert block_means([], 5).size == 0


def test_exact_permutation_p_value_counts_assignments():
    # Blocks 0, 0 before and 1, 1 after: of the C(4, 2) = 6 ways to pick the "after" blocks,
    # only the observed one reaches a difference of 1.
    result = shift_test([0.0, 0.0], [1.0, 1.0], block_length=1, n_permutations=100, rng=None)
    assert result.exact and result.difference == 1.0
    assert result.p_value == pytest.approx(1 / 6)
    assert (result.n_blocks_before, result.n_blocks_after) == (2, 2)


def test_no_shift_gives_p_value_one_and_lower_after_is_not_significant():
    flat = shift_test([0.02] * 8, [0.02] * 8, 2, 9999, np.random.default_rng(0))
    assert flat.difference == 0.0 and flat.p_value == 1.0
    lower_after = shift_test([1.0, 1.0], [0.0, 0.0], 1, 100, None)
    assert lower_after.p_value == 1.0


def test_sampled_permutations_bound_the_p_value_by_their_number():
    result = shift_test([0.0] * 30, [1.0] * 30, 1, 999, np.random.default_rng(1))
    assert not result.exact
    assert result.p_value == pytest.approx(1 / 1000)


def test_an_empty_side_gives_no_evidence():
    assert shift_test([], [1.0, 2.0], 1, 99, None).p_value == 1.0


def test_bootstrap_interval_of_constant_single_and_empty_values():
    rng = np.random.default_rng(0)
    assert block_bootstrap_interval([0.01] * 20, 5, 200, 0.95, rng) == pytest.approx((0.01, 0.01))
    assert block_bootstrap_interval([0.3], 5, 200, 0.95, rng) == (0.3, 0.3)
    assert all(math.isnan(v) for v in block_bootstrap_interval([], 5, 200, 0.95, rng))


def test_bootstrap_interval_brackets_the_mean_and_is_seeded():
    values = np.random.default_rng(3).uniform(0, 0.02, size=60)
    first = block_bootstrap_interval(values, 5, 500, 0.95, np.random.default_rng(7))
    again = block_bootstrap_interval(values, 5, 500, 0.95, np.random.default_rng(7))
    assert first == again
    assert values.min() <= first[0] < values.mean() < first[1] <= values.max()
