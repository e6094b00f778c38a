"""The blind check of the likelihood tests that compare real rows with other rows: the model's
pairs won against the best data-only rule's rate on the same pairs."""

import pytest

from tabmem.results import Verdict
from tabmem.stats.blind_check import EXPLAINED, BlindCheck
from tabmem.stats.pvalues import binomial_greater

NN, COPULA = "nearest neighbours", "copula conditional"


def chances(preferred: int, n: int = 50, rule: str = NN) -> list[dict[str, float]]:
    """``n`` pairs of which ``rule`` prefers the real row in the first ``preferred``; the
    copula prefers it in every other pair, and a coin flip in half."""
    return [
        {rule: float(i < preferred), COPULA: float(i % 2 == 0), "chance": 0.5} for i in range(n)
    ]


def test_a_model_that_prefers_real_rows_as_often_as_a_data_only_rule_gets_no_evidence():
    # A rule that read no row prefers the real row in 45 of 50 pairs; so does the model.
    # Against a coin flip that would be p = 2e-9 and evidence; against the rule it is nothing.
    blind = BlindCheck.of(chances(45), wins=45, alpha=0.01, min_margin=0.1)
    decision = blind.decision("Min-K% score")
    assert blind.baseline == pytest.approx(0.9) and blind.set_by == NN
    assert blind.p_value == pytest.approx(binomial_greater(45, 50, 0.9))
    assert binomial_greater(45, 50, 0.5) < 1e-8  # the old null
    assert blind.explained and blind.data_only_p_value < 0.01
    assert decision.verdict == Verdict.NO_EVIDENCE, decision.reason
    assert EXPLAINED in decision.reason and NN in decision.reason
    assert blind.metrics()["data_only_rate"] == pytest.approx(0.9)
    assert blind.metrics()["distribution_explains"] == 1.0
    assert blind.info()["baseline_set_by"] == NN and EXPLAINED in blind.info()["blind_check"]


def test_a_model_that_wins_every_pair_where_the_rules_are_at_a_coin_flip_gets_evidence():
    blind = BlindCheck.of(chances(25), wins=50, alpha=0.01, min_margin=0.1)
    decision = blind.decision("Min-K% score")
    assert blind.baseline == 0.5 and not blind.explained
    assert decision.verdict == Verdict.EVIDENCE, decision.reason
    assert blind.p_value == pytest.approx(0.5**50)
    assert EXPLAINED not in decision.reason


def test_the_baseline_is_a_coin_flip_where_no_rule_reaches_one():
    per_pair = [{NN: float(i < 10), COPULA: float(i % 3 == 0), "chance": 0.5} for i in range(50)]
    blind = BlindCheck.of(per_pair, wins=30, alpha=0.01, min_margin=0.1)
    assert blind.baseline == 0.5 and blind.set_by == "chance"
    assert blind.data_only_rate == pytest.approx(0.34)  # the copula's every third pair
    assert blind.p_value == pytest.approx(binomial_greater(30, 50, 0.5))


def test_the_baseline_is_the_best_single_rule_not_the_best_rule_per_pair():
    # Two rules that disagree on every pair: each prefers the real row in half of them, and
    # the best per pair would be 1, which no model without the rows reaches.
    per_pair = [{NN: float(i % 2), COPULA: float(1 - i % 2), "chance": 0.5} for i in range(40)]
    blind = BlindCheck.of(per_pair, wins=34, alpha=0.01, min_margin=0.1)
    assert blind.baseline == pytest.approx(0.5)
    assert blind.decision("score").verdict == Verdict.EVIDENCE


def test_a_model_that_wins_clearly_beyond_a_strong_rule_still_gets_evidence():
    # The rule alone would be evidence (35 of 50: p = 0.003), the model wins all 50.
    blind = BlindCheck.of(chances(35), wins=50, alpha=0.01, min_margin=0.1)
    decision = blind.decision("score")
    assert blind.explained and decision.verdict == Verdict.EVIDENCE, decision.reason
    assert "beyond the best data-only rule" in decision.reason


def test_where_no_model_could_beat_the_rule_the_cell_cannot_decide():
    # 48 of 50: even 50 wins of 50 is p = 0.96^50 = 0.13 against that rate.
    blind = BlindCheck.of(chances(48), wins=50, alpha=0.01, min_margin=0.1)
    decision = blind.decision("score")
    assert not blind.within_reach
    assert decision.verdict == Verdict.NOT_APPLICABLE
    assert decision.reason.startswith(EXPLAINED)


def test_without_untied_pairs_the_baseline_is_a_coin_flip():
    blind = BlindCheck.of([], wins=0, alpha=0.01, min_margin=0.1)
    assert blind.baseline == 0.5 and blind.p_value == 1.0 and not blind.explained
