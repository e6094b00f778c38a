"""The verdict rule: significant and large is evidence, one of the two is ambiguous."""

from tabmem.results import Verdict
from tabmem.stats.verdicts import Decision, decide, strongest


def test_both_conditions_give_evidence():
    assert decide("x", 0.001, 0.5, 0.01, 0.1).verdict is Verdict.EVIDENCE


def test_significant_but_small_is_ambiguous():
    decision = decide("x", 0.001, 0.05, 0.01, 0.1)
    assert decision.verdict is Verdict.AMBIGUOUS
    assert "effect is small" in decision.reason


def test_large_but_not_significant_is_ambiguous():
    assert decide("x", 0.2, 0.3, 0.01, 0.1).verdict is Verdict.AMBIGUOUS


def test_neither_is_no_evidence():
    assert decide("x", 0.5, 0.0, 0.01, 0.1).verdict is Verdict.NO_EVIDENCE


def test_p_equal_to_alpha_is_not_significant():
    assert decide("x", 0.01, 0.5, 0.01, 0.1).verdict is Verdict.AMBIGUOUS


def test_an_effect_equal_to_the_minimum_in_decimals_is_large():
    assert 0.6 - 0.5 < 0.1  # the float edge: 15 of 25 pairs won against 0.5
    assert decide("x", 0.001, 0.6 - 0.5, 0.01, 0.1).verdict is Verdict.EVIDENCE
    assert decide("x", 0.001, 0.12 - 0.02, 0.01, 0.1).verdict is Verdict.EVIDENCE
    assert decide("x", 0.001, 0.0999, 0.01, 0.1).verdict is Verdict.AMBIGUOUS


def test_strongest_prefers_evidence_then_the_first():
    weak = Decision(Verdict.NO_EVIDENCE, "a")
    mid = Decision(Verdict.AMBIGUOUS, "b")
    assert strongest([weak, mid]) is mid
    assert strongest([weak, Decision(Verdict.NO_EVIDENCE, "c")]) is weak
