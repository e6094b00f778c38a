"""p-values and intervals pinned to values computed by hand."""

import pytest

from tabmem.stats.pvalues import (
    binomial_greater,
    clopper_pearson,
    mcnemar_greater,
    wilcoxon_greater,
)


def test_binomial_tail_matches_the_hand_sum():
    # P(X >= 3), X ~ Bin(10, 0.1) = 1 - 0.9^10 - 10*0.1*0.9^9 - 45*0.01*0.9^8
    by_hand = 1 - 0.9**10 - 10 * 0.1 * 0.9**9 - 45 * 0.01 * 0.9**8
    assert binomial_greater(3, 10, 0.1) == pytest.approx(by_hand, rel=1e-9)
    assert binomial_greater(2, 4, 0.5) == pytest.approx(11 / 16)


def test_binomial_edges():
    assert binomial_greater(0, 10, 0.3) == 1.0
    assert binomial_greater(1, 10, 0.0) == 0.0
    assert binomial_greater(5, 10, 1.0) == 1.0
    assert binomial_greater(1, 0, 0.5) == 1.0


def test_mcnemar_counts_only_discordant_pairs():
    assert mcnemar_greater(5, 0) == pytest.approx(1 / 32)
    assert mcnemar_greater(4, 1) == pytest.approx(6 / 32)
    assert mcnemar_greater(0, 0) == 1.0


def test_wilcoxon_all_positive_is_one_over_two_to_the_n():
    assert wilcoxon_greater([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(1 / 32)
    assert wilcoxon_greater([0.0, 0.0]) == 1.0
    assert wilcoxon_greater([-0.1, -0.2, -0.3, -0.4, -0.5]) == pytest.approx(1.0)


def test_clopper_pearson_zero_hits_has_the_closed_form_upper_bound():
    low, high = clopper_pearson(0, 10)
    assert low == 0.0
    assert high == pytest.approx(1 - 0.025**0.1)
    assert clopper_pearson(10, 10)[1] == 1.0
