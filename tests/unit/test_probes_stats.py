"""Statistics of the probes, pinned by hand-computable values."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from tabmem.results import Verdict
from tabmem.stats.best_of import BestOf, choice_chances
from tabmem.stats.hits import CountRule, HitCount, unreachable_reason
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


def chances(questions):
    return [{**choice_chances({"rule": s}, c), "chance": 0.2} for s, c in questions]


def test_verdicts_compare_the_accuracy_with_the_best_data_only_rule() -> None:
    rule = CountRule(alpha=0.001, weak_alpha=0.01, min_hits=3)
    # 4 questions cannot reach p < 0.001 at chance 0.2: 0.2^4 = 0.0016; 5 can: 0.00032
    assert "p=0.0016" in unreachable_reason(4, 0.2, rule, "x")
    assert unreachable_reason(5, 0.2, rule, "x") == ""
    assert "min_hits=3" in unreachable_reason(2, 0.01, rule, "x")
    # the rule right on 10 of 40 questions, all with one option scored best
    questions = [([1.0, 0.0, 0.0, 0.0, 0.0], 0)] * 10 + [([0.0, 1.0, 0.0, 0.0, 0.0], 0)] * 30
    # the better of chance (0.2) and the rule (right on 10 of 40): the rule's 0.25
    assert BestOf.of(chances(questions)).rate == pytest.approx(0.25)
    assert BestOf.of(chances(questions[10:])).rate == pytest.approx(0.2)  # chance when higher
    right = HitCount(40, 40, 0.25)
    assert choice_verdict(ChoiceSummary(40, 40, 5), right, rule)[0] == Verdict.EVIDENCE
    # right exactly where the data-only rule is right: what a model without the rows reaches
    same = HitCount(10, 40, 0.25)
    assert choice_verdict(ChoiceSummary(10, 40, 5), same, rule)[0] == Verdict.NO_EVIDENCE
    # 12 more right answers than the rule: 22/40 against 0.25, p = 4.9e-5
    verdict, reason = choice_verdict(ChoiceSummary(22, 40, 5), HitCount(22, 40, 0.25), rule)
    assert verdict == Verdict.EVIDENCE and "baseline rate 0.250" in reason
    # 18/40: p = 0.0047, between alpha and weak_alpha
    verdict, reason = choice_verdict(ChoiceSummary(18, 40, 5), HitCount(18, 40, 0.25), rule)
    assert verdict == Verdict.AMBIGUOUS and "more queries can tell" in reason
