"""The dataset verdict: the Cauchy combination, Holm's procedure, the rule, and the grouping of
a grid's outcomes into one verdict per model × file."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from rich.console import Console

from tabmem.report.dataset_verdicts import combine_outcomes, dataset_outcomes, rule_of
from tabmem.report.summary import print_summary
from tabmem.results import CellResult, Verdict
from tabmem.stats.combine import (
    P_CEILING,
    DatasetRule,
    benjamini_hochberg,
    cauchy_combination,
    decide_dataset,
    holm_adjusted,
)

RULE = DatasetRule(alpha=0.001, weak_alpha=0.01)


def outcome_of(test, verdict, p_value, run_id="", reason=""):
    """One test's record as the combination reads it."""
    return CellResult(
        "m",
        "d",
        test,
        "original",
        "finished",
        verdict,
        p_value=p_value,
        run_id=run_id,
        reason=reason,
    )


def test_one_p_value_combines_to_itself_up_to_the_ceiling():
    for p in (1e-12, 1e-4, 0.03, 0.5):
        assert math.isclose(cauchy_combination([p]), p, rel_tol=1e-6)
    assert cauchy_combination([0.9]) == pytest.approx(P_CEILING)


def test_identical_p_values_combine_to_the_same_value():
    # perfectly dependent tests: k copies of one p-value are worth one test, not k
    for p in (1e-6, 0.002, 0.2):
        assert math.isclose(cauchy_combination([p] * 10), p, rel_tol=1e-6)


def test_one_strong_test_among_many_weak_costs_about_k():
    combined = cauchy_combination([1e-6] + [0.5] * 9)
    assert 0.9e-5 < combined < 1.1e-5


def test_tests_that_found_nothing_do_not_dilute_one_that_did():
    assert cauchy_combination([1e-8, 1.0, 1.0]) < 1e-7
    assert cauchy_combination([1.0, 1.0]) == pytest.approx(P_CEILING)
    # a lab checkpoint: Min-K% Prob 0.0024 beside six tests with no hit and two weak ones
    lab = [0.0599, 1.0, 0.9766, 1.0, 1.0, 1.0, 1.0, 1.0, 0.00237]
    assert cauchy_combination(lab) < 0.025


def test_several_moderate_tests_add_up():
    assert cauchy_combination([0.01] * 3 + [0.02] * 3) < 0.02
    assert cauchy_combination([0.004, 0.004, 0.004]) < 0.005


@pytest.mark.parametrize(
    ("dependent", "low", "high"), [(False, 0.0085, 0.0115), (True, 0.0095, 0.0135)]
)
def test_false_positive_rate_under_the_null_is_near_alpha(dependent, low, high):
    """10 uniform p-values, independent or equi-correlated (rho 0.8 Gaussian copula):
    P(combined < 0.01) over 40,000 draws (binomial sd 0.0005). Under strong dependence the
    combination is slightly liberal: 1,000,000 draws gave 0.0114 at 0.01 and 0.00110 at 0.001
    (rho 0.5: 0.0123 and 0.00116; independent: 0.0104 and 0.00101), which docs/tests.md
    states."""
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    draws = 40_000
    z = rng.standard_normal((draws, 10))
    if dependent:
        z = math.sqrt(0.8) * rng.standard_normal((draws, 1)) + math.sqrt(0.2) * z
    p = norm.sf(z)
    rejected = sum(cauchy_combination(row) < 0.01 for row in p)
    assert low < rejected / draws < high, rejected


def test_holm_adjusts_step_down_and_keeps_order():
    assert holm_adjusted([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm_adjusted([0.9, 0.8]) == pytest.approx([1.0, 1.0])


def test_evidence_names_the_tests_that_carry_it():
    verdict = decide_dataset(
        [
            outcome_of("row_completion", "evidence", 1e-7, "r1"),
            outcome_of("feature_completion", "evidence", 6e-4, "r2"),
            outcome_of("first_token", "no_evidence", 0.6, "r3"),
        ],
        RULE,
    )
    assert verdict.verdict == Verdict.EVIDENCE
    assert verdict.carried_by == ["row_completion"]  # Holm: 2 * 6e-4 is not below 0.001
    assert verdict.p_value < 1e-6
    assert "carried by row_completion" in verdict.reason


def test_joint_evidence_without_a_single_carrier_says_so():
    verdict = decide_dataset([outcome_of(t, "evidence", 6e-4) for t in "abc"], RULE)
    assert verdict.verdict == Verdict.EVIDENCE and verdict.carried_by == []
    assert "carried jointly" in verdict.reason


def test_an_ambiguous_test_enters_at_alpha_not_at_its_own_p():
    # an effect guard failed, or too few hits: the test said ambiguous at p = 5e-4
    tests = [outcome_of("min_k_prob", "ambiguous", 5e-4)]
    tests += [outcome_of(f"t{i}", "no_evidence", 0.5) for i in range(9)]
    rule = DatasetRule()
    verdict = decide_dataset(tests, rule)
    assert verdict.verdict != Verdict.EVIDENCE, verdict.reason
    assert cauchy_combination([5e-4] + [0.5] * 9) < rule.alpha  # its raw p alone would be
    assert verdict.entered["min_k_prob"] == rule.alpha
    assert verdict.combined[0].p_value == 5e-4  # the record keeps its own p beside it
    assert "min_k_prob p=0.01 (own p=0.0005, ambiguous)" in verdict.reason
    assert verdict.carried_by == []


def test_a_no_evidence_test_enters_at_weak_alpha_and_evidence_as_it_is():
    verdict = decide_dataset(
        [outcome_of("a", "no_evidence", 0.003), outcome_of("b", "evidence", 2e-4)], RULE
    )
    assert verdict.entered == {"a": RULE.weak_alpha, "b": 2e-4}
    assert verdict.holm == pytest.approx({"a": RULE.weak_alpha, "b": 4e-4})
    assert verdict.carried_by == ["b"]


def test_ambiguous_and_no_evidence_thresholds():
    weak = decide_dataset([outcome_of("a", "ambiguous", 0.004), outcome_of("b", "x", None)], RULE)
    assert weak.verdict == Verdict.AMBIGUOUS and weak.left_out == {"b": "verdict x"}
    none = decide_dataset([outcome_of("a", "no_evidence", 0.3)], RULE)
    assert none.verdict == Verdict.NO_EVIDENCE


def test_the_header_enters_by_its_p_value_like_every_test():
    # a header rule's evidence from one split of four on iris (whole-row baseline 0.02)
    header = outcome_of("header", "evidence", 0.078, "h")
    verdict = decide_dataset([header, outcome_of("row_completion", "no_evidence", 0.4)], RULE)
    assert verdict.verdict == Verdict.NO_EVIDENCE and verdict.carried_by == []
    assert [t.test for t in verdict.combined] == ["header", "row_completion"]


def test_a_decided_test_without_a_p_value_is_left_out_with_the_reason():
    old_header = outcome_of("header", "evidence", None, "h")
    verdict = decide_dataset([old_header, outcome_of("row_completion", "no_evidence", 0.4)], RULE)
    assert verdict.verdict == Verdict.NO_EVIDENCE
    assert "without a p-value" in verdict.left_out["header"]
    alone = decide_dataset([old_header], RULE)
    assert alone.verdict == Verdict.NOT_APPLICABLE and "without a p-value" in alone.reason


def test_benjamini_hochberg_q_values_in_the_order_given():
    q = benjamini_hochberg([0.01, 0.04, None, 0.03, 0.5])
    assert q[2] is None  # no p-value: not one of the hypotheses
    assert q == [pytest.approx(0.04), pytest.approx(0.16 / 3), None, pytest.approx(0.16 / 3), 0.5]
    assert benjamini_hochberg([0.9, 0.95]) == [0.95, 0.95]


def test_bh_over_a_grid_of_null_verdicts_keeps_the_family_rate_that_alpha_alone_does_not():
    """8 independent null verdicts at alpha 0.01: some p < 0.01 in about 8 % of grids, some
    q < 0.01 in about 1 % (all nulls: the false discovery rate is the family-wise rate)."""
    rng = np.random.default_rng(1)
    grids = rng.uniform(size=(20_000, 8))
    raw = np.mean([(row < 0.01).any() for row in grids])
    bh = np.mean([min(benjamini_hochberg(list(row))) < 0.01 for row in grids])
    assert 0.07 < raw < 0.09
    assert 0.007 < bh < 0.013


def test_nothing_decided_is_not_applicable_with_the_reasons():
    verdict = decide_dataset(
        [outcome_of("header", "not_applicable", None, reason="the file has 3 rows")], RULE
    )
    assert verdict.verdict == Verdict.NOT_APPLICABLE
    assert "the file has 3 rows" in verdict.reason


def _outcome(test, group="g1", verdict="no_evidence", p=0.5, status="finished", **kw):
    return CellResult(
        model=kw.get("model", "m"),
        dataset=kw.get("dataset", "iris"),
        test=test,
        transform="original",
        status=status,
        verdict=verdict,
        run_id=kw.get("run_id", f"run-{test}-{group}"),
        p_value=p,
        group=group,
        message=kw.get("message", ""),
    )


def test_outcomes_group_by_model_file_and_need_two_tests_of_rows_seen():
    outcomes = [
        _outcome("row_completion", "g1", "evidence", 1e-9),
        _outcome("first_token", "g1"),
        _outcome("feature_names", "g1", p=1e-12),  # a knowledge test: never combined
        _outcome("row_completion", "g2", model="other"),  # alone on its model: its own answer
        _outcome("feature_completion", "g2", status="skipped", run_id="", p=None),
    ]
    found = combine_outcomes(outcomes, RULE)
    assert len(found) == 1
    first, verdict = found[0]
    assert first.group == "g1" and verdict.verdict == Verdict.EVIDENCE
    assert {t.test for t in verdict.combined} == {"row_completion", "first_token"}


def test_a_failed_test_is_left_out_with_its_error():
    outcomes = [
        _outcome("row_completion", p=0.2),
        _outcome("header", verdict="", p=None, status="failed", message="timeout"),
    ]
    [(_, verdict)] = combine_outcomes(outcomes, RULE)
    assert verdict.left_out == {"header": "failed: timeout"}
    assert verdict.verdict == Verdict.NO_EVIDENCE


def test_without_a_store_nothing_is_logged():
    found = dataset_outcomes(
        [_outcome("row_completion", p=1e-9, verdict="evidence"), _outcome("first_token")], RULE
    )
    assert [(o.model, o.dataset, o.run_id, o.verdict.verdict) for o in found] == [
        ("m", "iris", "", Verdict.EVIDENCE)
    ]


def test_the_summary_shows_each_verdicts_grid_q_and_what_it_controls(tmp_path):
    outcomes = [
        _outcome("row_completion", "g1", "evidence", 1e-6),
        _outcome("first_token", "g1", p=0.5),
        _outcome("row_completion", "g2", "no_evidence", 0.2, dataset="wine"),
        _outcome("first_token", "g2", p=0.5, dataset="wine"),
    ]
    for i, outcome in enumerate(outcomes):
        outcome.write(tmp_path / str(i))
    found = dataset_outcomes(outcomes, RULE)
    assert [o.q_family for o in found] == [2, 2]
    assert found[0].q_value == pytest.approx(2 * found[0].verdict.p_value)
    console = Console(width=300, record=True, file=io.StringIO())
    print_summary(tmp_path, "sqlite:///x.db", "e", console, verdicts=found)
    text = console.export_text()
    assert "grid q" in text and f"{found[0].q_value:.2g}" in text
    assert "Benjamini-Hochberg over the 2 dataset verdicts" in text
    assert "false discovery rate among them at 0.001" in text


def test_rule_from_config_and_defaults():
    assert rule_of({"dataset_verdict": {"alpha": 0.01, "weak_alpha": 0.05}}) == DatasetRule(
        0.01, 0.05
    )
    assert rule_of(None) == DatasetRule()


def test_a_test_recorded_twice_enters_twice_under_a_name_mlflow_accepts():
    outcomes = [
        _outcome("sample", p=0.4, run_id="a"),
        _outcome("sample", p=0.02, run_id="b"),
        _outcome("row_completion", p=0.5),
    ]
    [(_, verdict)] = combine_outcomes(outcomes, RULE)
    assert [t.test for t in verdict.combined] == ["sample", "sample-2", "row_completion"]
    assert verdict.holm["sample-2"] == pytest.approx(0.06)


def test_a_run_two_cells_name_enters_the_verdict_once():
    # memorization and feature_completion in one grid: the second cell reports the suite
    # member's finished run again; its p-value must not count twice.
    outcomes = [
        _outcome("feature_completion", p=0.003, run_id="same"),
        _outcome("feature_completion", p=0.003, run_id="same"),
        _outcome("row_completion", p=0.5),
    ]
    [(_, verdict)] = combine_outcomes(outcomes, RULE)
    assert [t.test for t in verdict.combined] == ["feature_completion", "row_completion"]
