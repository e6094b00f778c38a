"""Data-only baselines on hand-made tables, with values computed by hand."""

import functools
import random

import pytest

from tabmem.battery.windows import target_positions
from tabmem.data import dataset_specs, load_dataset
from tabmem.stats.baselines import exact_row_baseline, marginal_match
from tabmem.stats.predictors import first_token_baseline
from tabmem.stats.tokens import rule_first_token


def test_marginal_match_draw_and_mode():
    chance = marginal_match(["a", "a", "b", "c"])
    assert chance.draw_rate == pytest.approx(0.5**2 + 0.25**2 + 0.25**2)
    assert chance.mode_rate == pytest.approx(0.5)
    assert chance.rate == pytest.approx(0.5)


def test_exact_row_baseline_three_guesses():
    rows = ["x,1", "x,1", "y,2", "z,1"]
    columns = [["x", "x", "y", "z"], ["1", "1", "2", "1"]]
    baseline = exact_row_baseline(rows, columns)
    assert baseline.mode_row == pytest.approx(2 / 4)
    assert baseline.repeat_previous == pytest.approx(1 / 3)
    # per row: .5*.75, .5*.75, .25*.25, .25*.75 -> mean 0.25
    assert baseline.marginal_product == pytest.approx(0.25)
    assert baseline.rate == pytest.approx(0.5)


def frame_of(tokens):
    import pandas as pd

    return pd.DataFrame({"first": tokens, "n": range(len(tokens))})


def test_alternating_first_tokens_are_predicted_from_the_previous_row():
    tokens = ["a", "b"] * 100
    result = first_token_baseline(
        tokens.__getitem__, frame_of(tokens), queried=[50, 51], context_rows=1, seed=0
    )
    by_name = {p.name: p for p in result.predictors}
    assert by_name["mode"].accuracy == pytest.approx(0.5, abs=0.15)
    assert by_name["logistic_regression"].accuracy == 1.0
    assert by_name["gradient_boosted_trees"].accuracy == 1.0
    assert result.best.accuracy == 1.0
    assert [by_name["gradient_boosted_trees"].predictions[i] for i in (50, 51)] == ["a", "b"]
    assert result.positions == list(range(1, 200))  # every position, the queried ones too
    assert result.rate == 1.0


def test_cross_fitted_mode_is_the_share_of_the_mode_over_every_position():
    tokens = ["a"] * 60 + ["b"] * 20
    tokens = [tokens[(i * 37) % 80] for i in range(80)]  # a fixed scramble
    result = first_token_baseline(
        tokens.__getitem__, frame_of(tokens), queried=[5, 9], context_rows=1, folds=4
    )
    mode = next(p for p in result.predictors if p.name == "mode")
    share = tokens[1:].count("a") / 79  # positions 1..79; every fold's training mode is "a"
    assert mode.accuracy == pytest.approx(share)
    assert set(mode.predictions.values()) == {"a"}
    assert result.chance == pytest.approx(share)
    assert result.rate == pytest.approx(max(result.chance, result.best.accuracy))


def test_tokens_without_pattern_are_not_learnt_from_their_own_rows():
    rng = random.Random(4)
    tokens = [rng.choice("abcd") for _ in range(400)]
    frame = frame_of(tokens).assign(key=[rng.random() for _ in tokens])
    result = first_token_baseline(tokens.__getitem__, frame, queried=[], context_rows=2)
    # fitted on the rows they score, the trees recall this noise (accuracy 0.83 in-sample)
    assert all(p.accuracy < 0.4 for p in result.predictors)


@functools.cache
def iris_tokens():
    iris = load_dataset(dataset_specs()["iris"])
    return [rule_first_token(row) for row in iris.rows], iris.frame


def test_iris_baseline_with_most_rows_queried_scores_every_row_and_holds_across_seeds():
    tokens, frame = iris_tokens()
    queried = target_positions(len(tokens), 10, 136, seed=0)
    results = [first_token_baseline(tokens.__getitem__, frame, queried, seed=s) for s in range(4)]
    bests = [r.best.accuracy for r in results]
    # 3 holdout rows could only give 0, 1/3, 2/3 or 1, and flipped with the seed
    assert max(bests) - min(bests) <= 0.1
    for result in results:
        assert len(result.positions) == 147  # every row with three rows before it
        assert set(queried) <= set(result.positions)
