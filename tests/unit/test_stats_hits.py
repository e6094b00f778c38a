"""The count rule of the tests of rows seen: no floor on a rate, a floor on hits, a share."""

from __future__ import annotations

import pytest

from tabmem.results import Verdict
from tabmem.stats.hits import CountRule, HitCount, decide_hits, unreachable_reason
from tabmem.stats.pvalues import binomial_greater

RULE = CountRule(alpha=0.01, weak_alpha=0.05, min_hits=3)


def verdict(hits: int, n: int, baseline: float, rule: CountRule = RULE) -> Verdict:
    count = HitCount(hits, n, baseline)
    return decide_hits("x", count, rule, count.p_value).verdict


def test_the_p_value_is_the_binomial_tail_at_the_baseline():
    assert HitCount(3, 25, 0.02).p_value == pytest.approx(binomial_greater(3, 25, 0.02))
    assert HitCount(0, 25, 0.02).p_value == 1.0


def test_three_of_25_iris_rows_is_ambiguous_with_its_share():
    # the float edge of the old rule: 0.12 - 0.02 = 0.0999… fell short of a 0.1 floor
    count = HitCount(3, 25, 0.02)
    assert 0.01 < count.p_value < 0.05
    decision = decide_hits("exact rows", count, RULE, count.p_value)
    assert decision.verdict is Verdict.AMBIGUOUS
    assert "share of rows beyond the baseline 0.10" in decision.reason
    low, high = count.share_interval()
    assert 0.0 <= low < 0.01 and 0.25 < high < 0.35


def test_nine_percent_of_rows_is_evidence_once_enough_are_asked():
    # baseline ~0: the old floor of 0.1 on the rate could never be reached at 9 %
    assert verdict(9, 100, 0.001) is Verdict.EVIDENCE
    assert verdict(23, 250, 0.001) is Verdict.EVIDENCE


def test_the_floor_on_hits_keeps_one_or_two_coincidences_from_evidence():
    assert HitCount(2, 25, 1e-6).p_value < RULE.alpha
    assert verdict(2, 25, 1e-6) is Verdict.AMBIGUOUS
    assert verdict(3, 25, 1e-6) is Verdict.EVIDENCE


def test_no_signal_is_no_evidence():
    assert verdict(6, 25, 0.25) is Verdict.NO_EVIDENCE
    assert verdict(0, 25, 0.0) is Verdict.NO_EVIDENCE


@pytest.mark.parametrize("n", [10, 25, 40, 100, 250])
@pytest.mark.parametrize("baseline", [0.0, 0.001, 0.02, 0.1, 0.25, 0.5, 0.8])
@pytest.mark.parametrize("gain", [0.05, 0.1, 0.2, 0.4])
def test_evidence_at_n_queries_stays_evidence_at_ten_times_as_many(n, baseline, gain):
    rate = min(1.0, baseline + gain * (1 - baseline))
    hits = round(rate * n)
    if verdict(hits, n, baseline) is Verdict.EVIDENCE:
        assert verdict(round(rate * 10 * n), 10 * n, baseline) is Verdict.EVIDENCE
    if verdict(hits, n, baseline) is not Verdict.NO_EVIDENCE:
        assert verdict(round(rate * 10 * n), 10 * n, baseline) is not Verdict.NO_EVIDENCE


def test_share_is_the_recall_of_a_model_that_answers_like_the_baseline_otherwise():
    # recall 0.2 of the rows, right at the baseline's rate 0.25 on the others
    count = HitCount(round((0.2 + 0.8 * 0.25) * 1000), 1000, 0.25)
    assert count.share() == pytest.approx(0.2, abs=0.002)


def test_unreachable_names_why():
    assert "min_hits=3" in unreachable_reason(2, 0.0, RULE, "rows")
    assert "25 right answers of 25 would give" in unreachable_reason(25, 0.9, RULE, "rows")
    assert unreachable_reason(25, 0.5, RULE, "rows") == ""
    assert "no query" in unreachable_reason(0, 0.0, RULE, "rows")
