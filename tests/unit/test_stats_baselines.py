"""Data-only baselines on hand-made tables, with values computed by hand."""

import pytest

from tabmem.stats.baselines import exact_row_baseline, marginal_match
from tabmem.stats.predictors import first_token_baseline


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
    assert by_name["gradient_boosted_trees"].predictions == ["a", "b"]
    assert result.train_positions + result.holdout_positions == 197  # 199 positions - 2 queried


def test_mode_baseline_on_a_skewed_column_is_its_holdout_share():
    tokens = ["a"] * 60 + ["b"] * 20
    tokens = [tokens[(i * 37) % 80] for i in range(80)]  # a fixed scramble
    result = first_token_baseline(
        tokens.__getitem__, frame_of(tokens), queried=[], context_rows=1, holdout_fraction=0.5
    )
    mode = next(p for p in result.predictors if p.name == "mode")
    holdout_share = mode.accuracy * result.holdout_positions
    assert holdout_share == pytest.approx(round(holdout_share))  # a count of "a" in the holdout
    assert 0.6 <= mode.accuracy <= 0.9
