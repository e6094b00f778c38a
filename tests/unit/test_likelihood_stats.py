"""The paired statistics of the likelihood tests with a reference, on synthetic scores: a
known shift is found, identical distributions give p-values spread evenly over (0, 1]."""

import math

import numpy as np
import pytest

from tabmem.stats.likelihood import model_bits, paired_shift_test, zlib_bits, zlib_score


def test_a_known_shift_gives_a_small_p_value():
    rng = np.random.default_rng(0)
    base = rng.normal(-40.0, 8.0, 60)  # per-row log-likelihoods that vary a lot between rows
    real = base + rng.normal(0.6, 1.0, 60)  # the real row of each pair, a little likelier
    twin = base + rng.normal(0.0, 1.0, 60)
    shift = paired_shift_test(real, twin, 1999, np.random.default_rng(1))
    assert shift.p_value < 0.01
    assert shift.p_value >= 1 / 2000  # add-one: never 0
    assert 0.3 < shift.effect < 1.2
    assert shift.mean == pytest.approx(float(np.mean(real - twin)))
    # The pairing is what finds it: the rows' own spread hides the shift from an unpaired look.
    assert abs(np.mean(real) - np.mean(twin)) < np.std(base) / 5


def test_identical_distributions_give_uniform_p_values():
    rng = np.random.default_rng(2)
    p_values = []
    for _ in range(400):
        base = rng.normal(0.0, 5.0, 30)
        real, twin = base + rng.normal(0, 1, 30), base + rng.normal(0, 1, 30)
        p_values.append(paired_shift_test(real, twin, 199, rng).p_value)
    p = np.array(p_values)
    assert 0.02 <= np.mean(p <= 0.05) <= 0.09
    assert 0.42 <= np.mean(p <= 0.5) <= 0.58
    assert 0.45 <= p.mean() <= 0.55


def test_the_test_is_one_sided():
    rng = np.random.default_rng(3)
    twin = rng.normal(0, 1, 40)
    real = twin - rng.uniform(0.5, 1.5, 40)  # real rows less likely
    shift = paired_shift_test(real, twin, 999, rng)
    assert shift.p_value > 0.99
    assert shift.wins == 0 and shift.losses == 40 and shift.effect < -1


def test_identical_scores_give_p_one_and_no_effect():
    same = [-3.0, -1.5, -2.25, -7.0]
    shift = paired_shift_test(same, same, 99, np.random.default_rng(0))
    assert shift.p_value == 1.0
    assert shift.effect == 0.0 and shift.ties == 4 and shift.win_rate == 0.5
    constant = paired_shift_test([2.0, 3.0, 5.0], [1.0, 2.0, 4.0], 99, np.random.default_rng(0))
    assert constant.effect == math.inf  # every pair shifted by exactly 1


def test_the_permutations_are_seeded():
    rng = np.random.default_rng(4)
    a, b = rng.normal(0.2, 1, 25), rng.normal(0, 1, 25)
    first = paired_shift_test(a, b, 499, np.random.default_rng(7))
    again = paired_shift_test(a, b, 499, np.random.default_rng(7))
    assert first == again


@pytest.mark.parametrize(
    ("first", "second", "permutations"),
    [([], [], 9), ([1.0], [1.0, 2.0], 9), ([math.nan], [0.0], 9), ([1.0], [0.0], 0)],
)
def test_malformed_scores_are_refused(first, second, permutations):
    with pytest.raises(ValueError):
        paired_shift_test(first, second, permutations, np.random.default_rng(0))


def test_bits_and_the_zlib_score():
    assert model_bits([-math.log(2)] * 5) == pytest.approx(5.0)
    row = "5.1,3.5,1.4,0.2,Iris-setosa"
    assert zlib_bits(row) % 8 == 0 and zlib_bits(row) > 8 * 10
    assert zlib_bits(row * 20) < 20 * zlib_bits(row)  # repetition compresses
    likely, unlikely = [-0.1] * 12, [-2.0] * 12
    assert zlib_score(likely, row) > zlib_score(unlikely, row)
    assert zlib_score(unlikely, row) == pytest.approx(-model_bits(unlikely) / zlib_bits(row))


def test_differences_within_the_tolerance_are_ties():
    real = [1.0, 2.0, 3.0, 4.0]
    noisy = [1.0 + 1e-7, 2.0 - 1e-7, 3.0 + 1e-7, 3.5]
    shift = paired_shift_test(real, noisy, 99, np.random.default_rng(0), tie_tolerance=1e-3)
    assert (shift.wins, shift.losses, shift.ties) == (1, 0, 3)
    assert shift.mean == pytest.approx(0.125)
    exact = paired_shift_test(real, noisy, 99, np.random.default_rng(0))
    assert (exact.wins, exact.losses, exact.ties) == (2, 2, 0)
