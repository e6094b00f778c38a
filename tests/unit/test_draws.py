"""The weighted draw is ``random.Random.choices`` to the bit, and leaves the generator where
``choices`` leaves it."""

import random

import numpy as np
import pytest

from tabmem.stats.draws import weighted_index


@pytest.mark.parametrize("size", [1, 2, 7, 180, 4000])
def test_the_draw_is_the_index_choices_returns(size: int) -> None:
    maker = np.random.default_rng(size)
    for trial in range(200):
        weights = maker.random(size) ** 3 / maker.integers(1, 50)
        if trial % 3 == 0:
            weights[maker.random(size) < 0.5] = 0.0
            weights[0] += 1e-3  # never all zero
        if trial % 5 == 0:
            weights[:] = 20.0  # the ties a reference model meets among equally near rows
        ours, theirs = random.Random(trial), random.Random(trial)
        expected = theirs.choices(range(size), weights=weights.tolist())[0]
        assert weighted_index(ours, weights) == expected
        assert ours.random() == theirs.random()


def test_weights_that_sum_to_nothing_are_refused() -> None:
    with pytest.raises(ValueError, match="above zero"):
        weighted_index(random.Random(0), np.zeros(3))
