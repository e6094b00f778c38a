"""Statistics of the probes, pinned by hand-computable values."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from tabmem.results import Verdict
from tabmem.stats.paired import against_baseline, unreachable_reason
from tabmem.stats.probes import (
    ChoiceSummary,
    attribute_pool,
    choice_verdict,
    entropy_bits,
    frequency_rule_hit,
    log_frequency,
)


def test_entropy_in_bits_counts_empty_as_a_value() -> None:
    assert entropy_bits(["a", "a", "b", "b"]) == pytest.approx(1.0)
    assert entropy_bits(["a", "b", "c", "d"]) == pytest.approx(2.0)
    assert entropy_bits(["a", "", "a", ""]) == pytest.approx(1.0)
    assert entropy_bits(["a"] * 4) == 0.0
    assert entropy_bits([]) == 0.0


def test_the_pool_is_the_top_share_by_entropy_among_columns_with_enough_values() -> None:
    spread = [str(i) for i in range(8)]  # 3 bits
    pairs = [str(i // 2) for i in range(8)]  # 4 values: 2 bits
    skewed = ["x"] * 4 + ["a", "b", "c", "d"]  # 5 values: 2 bits as well (ties: file order)
    binary = ["0", "1"] * 4  # 1 bit, 2 values
    columns = [binary, pairs, spread, skewed]
    # five distinct values needed: only `spread` (8) and `skewed` (5) qualify
    assert attribute_pool(columns, 1, 5, 0.5) == [2, 3]
    # top quarter of four columns is one column, the highest entropy
    assert attribute_pool(columns, 1, 2, 0.25) == [2]
    # `needed` wins over a smaller share
    assert attribute_pool(columns, 3, 2, 0.25) == [2, 1, 3]


def test_log_frequency_is_add_one_smoothed() -> None:
    counts = Counter({"a": 3, "b": 1})
    assert log_frequency(counts, "a") == pytest.approx(math.log(4 / 5))
    assert log_frequency(counts, "z") == pytest.approx(math.log(1 / 5))


@pytest.mark.parametrize(
    ("scores", "correct", "hit"),
    [
        ([3.0, 1.0, 1.0], 0, 1.0),
        ([3.0, 1.0], 1, 0.0),
        ([1.0, 2.0, 2.0], 1, 0.5),
        ([0.0] * 5, 4, 0.2),
    ],
)
def test_the_frequency_rule_splits_ties_evenly(scores, correct, hit) -> None:
    assert frequency_rule_hit(scores, correct) == pytest.approx(hit)


def test_summary_p_value_is_the_binomial_tail_at_chance() -> None:
    assert ChoiceSummary(5, 5, 5).p_value == pytest.approx(0.2**5)
    # P(X >= 2), X ~ Bin(10, 0.2) = 1 - 0.8^10 - 10 * 0.2 * 0.8^9
    assert ChoiceSummary(2, 10, 5).p_value == pytest.approx(1 - 0.8**10 - 2 * 0.8**9)
    assert ChoiceSummary(0, 10, 5).p_value == 1.0
    assert ChoiceSummary(3, 12, 4).chance == 0.25 and ChoiceSummary(3, 12, 4).rate == 0.25
    low, high = ChoiceSummary(10, 10, 5).interval
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 10))


def _against(hits: list[float], baselines: list[float]):
    return against_baseline(hits, baselines)


def test_verdicts_compare_each_answer_with_its_questions_baseline() -> None:
    # 4 questions cannot reach p < 0.001 at chance 0.2: 0.2^4 = 0.0016; 5 can: 0.00032
    assert "p=0.0016" in unreachable_reason([0.2] * 4, 0.001, 0.1, "x")
    assert unreachable_reason([0.2] * 5, 0.001, 0.1, "x") == ""
    assert "less than the minimum effect" in unreachable_reason([0.95] * 40, 0.001, 0.1, "x")
    # where the rule is right, a right answer is certain under the null: only 0.2^2 is left
    assert "p=0.04" in unreachable_reason([1.0] * 8 + [0.2] * 2, 0.001, 0.1, "x")
    right = _against([1.0] * 40, [0.2] * 40)
    assert choice_verdict(ChoiceSummary(40, 40, 5), right, 0.001, 0.1)[0] == Verdict.EVIDENCE
    # right exactly where the data-only rule is right (10 of 40), else wrong: no evidence
    rule = [1.0] * 10 + [0.2] * 30
    same = _against([1.0] * 10 + [0.0] * 30, rule)
    assert same.effect == pytest.approx(0.25 - 0.4)
    assert choice_verdict(ChoiceSummary(10, 40, 5), same, 0.001, 0.1)[0] == Verdict.NO_EVIDENCE
    # 12 more right answers on the questions the rule gets wrong: 22/40 against 0.4
    better = _against([1.0] * 22 + [0.0] * 18, rule)
    assert better.effect == pytest.approx(0.15)
    verdict, reason = choice_verdict(ChoiceSummary(22, 40, 5), better, 0.001, 0.1)
    assert verdict == Verdict.AMBIGUOUS and "not significant" in reason
    assert "baseline of 0.40" in reason
