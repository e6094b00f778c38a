"""One answer per model × dataset: the p-values of the tests of rows seen combined into one.

The tests of one model on one file are not independent (a model that writes rows back does so
in several tests), so the combination must hold under any dependence between them:

- **Cauchy combination** (Liu & Xie 2020, "ACAT"): each p-value becomes a standard Cauchy
  variable ``tan((0.5 - p) * pi)``; their mean is again standard Cauchy when the p-values are
  uniform, whatever their dependence, to a close approximation in the small-p tail where a
  verdict is decided. One strong test carries it (about k times its p-value, like Bonferroni)
  and several moderate ones add up. A p-value of exactly 1 (no hit at all) maps to minus
  infinity and would veto every other test, so p-values are capped at ``P_CEILING`` first: a
  test that found nothing (p >= 0.5) adds nothing, rather than pulling the others down.
- **Holm's step-down procedure** names the tests that carry the evidence: those whose
  Holm-adjusted p-value is below ``alpha`` keep family-wise error control on their own.

The dataset verdict: ``evidence`` when the combined p-value is below ``alpha``, ``ambiguous``
below ``weak_alpha``, else ``no_evidence``; a test that decides by a rule without a p-value (the
header test) raises it to its own ``evidence`` or ``ambiguous``; ``not_applicable`` when no
test of rows seen could decide (each says why in the reason).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tabmem.results import Verdict

P_CEILING = 0.5
"""p-values above this count as this much (a Cauchy term of 0) in the combination. A discrete
test with no hit has p = 1, whose transform is minus infinity; capped at 0.99 instead, six
such tests turned a lab checkpoint's Min-K% Prob p = 0.0024 into a combined 0.56 (0.016 capped
at 0.5). The level is the same either way: 10 p-values, 1,000,000 draws, independent 0.0104 at
0.01 and 0.00101 at 0.001 with either cap; Gaussian copula rho 0.8: 0.0114 and 0.00110."""
P_FLOOR = 1e-300


def cauchy_combination(p_values: Sequence[float]) -> float:
    """The Cauchy combination of ``p_values`` (equal weights), a p-value in (0, 1]."""
    if len(p_values) == 0:
        raise ValueError("the Cauchy combination needs at least one p-value")
    clipped = [min(P_CEILING, max(P_FLOOR, float(p))) for p in p_values]
    # tan((0.5 - p) * pi) is cot(p * pi), which keeps its precision for tiny p
    terms = [math.cos(p * math.pi) / math.sin(p * math.pi) for p in clipped]
    statistic = sum(terms) / len(terms)
    if statistic > 0:  # the same as 0.5 - atan(T) / pi, without cancellation for large T
        return math.atan(1.0 / statistic) / math.pi
    return min(1.0, 0.5 - math.atan(statistic) / math.pi)


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (each at most 1)."""
    k = len(p_values)
    order = sorted(range(k), key=lambda i: p_values[i])
    adjusted = [0.0] * k
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * float(p_values[i])))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class DatasetRule:
    """The thresholds of the dataset verdict (``dataset_verdict`` in ``conf/config.yaml``)."""

    alpha: float = 0.01
    weak_alpha: float = 0.05


@dataclass(frozen=True)
class TestOutcome:
    """One test of rows seen on the model and file: its verdict, p-value and MLflow run."""

    __test__ = False  # not a pytest class

    test: str
    verdict: str
    p_value: float | None
    run_id: str = ""
    reason: str = ""


@dataclass
class DatasetVerdict:
    """The combined verdict of one model on one file, and what it rests on.

    ``combined`` are the tests whose p-values entered the combination, ``holm`` their
    Holm-adjusted p-values, ``carried_by`` those below ``alpha`` after Holm's adjustment and
    the rule tests at ``evidence`` (the tests that carry the evidence on their own),
    ``left_out`` the tests that could not decide and why, ``by_rule`` the tests that decided
    by a rule without a p-value.
    """

    verdict: Verdict
    p_value: float | None
    reason: str
    combined: list[TestOutcome] = field(default_factory=list)
    holm: dict[str, float] = field(default_factory=dict)
    carried_by: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    by_rule: list[TestOutcome] = field(default_factory=list)


DECIDED = (Verdict.EVIDENCE, Verdict.AMBIGUOUS, Verdict.NO_EVIDENCE)


def _has_p(outcome: TestOutcome) -> bool:
    return outcome.p_value is not None and not math.isnan(outcome.p_value)


def decide_dataset(outcomes: Sequence[TestOutcome], rule: DatasetRule) -> DatasetVerdict:
    """Combine the tests of rows seen of one model × file into its dataset verdict.

    A test that decides by a rule with no null distribution (the header test: whole rows
    written back after the cut) has a verdict but no p-value; its ``evidence`` or ``ambiguous``
    stands beside the combination (the stronger of the two is the dataset's), and its
    false-positive rate is measured like the combination's.
    """
    decided = [o for o in outcomes if o.verdict in DECIDED]
    combined = [o for o in decided if _has_p(o)]
    by_rule = [o for o in decided if not _has_p(o)]
    left_out = {
        o.test: (o.reason or f"verdict {o.verdict}") for o in outcomes if o.verdict not in DECIDED
    }
    if not decided:
        why = "; ".join(f"{test}: {reason}" for test, reason in left_out.items())
        return DatasetVerdict(
            Verdict.NOT_APPLICABLE,
            None,
            "no test of rows seen could decide" + (f" ({why})" if why else ""),
            left_out=left_out,
        )
    p, holm, verdict, reason = None, {}, Verdict.NO_EVIDENCE, ""
    if combined:
        p_values = [float(o.p_value) for o in combined]  # type: ignore[arg-type]
        p = cauchy_combination(p_values)
        holm = dict(zip((o.test for o in combined), holm_adjusted(p_values), strict=True))
        verdict, reason = _combined_decision(p, combined, holm, rule)
    carried = sorted((t for t, q in holm.items() if q < rule.alpha), key=holm.__getitem__)
    for o in by_rule:
        strength = DECIDED[::-1].index(Verdict(o.verdict))
        if strength > DECIDED[::-1].index(verdict):
            verdict = Verdict(o.verdict)
        if o.verdict == Verdict.EVIDENCE:
            carried.append(o.test)
    rules = "; ".join(f"{o.test} (a rule without a p-value): {o.verdict}" for o in by_rule)
    reason = "; ".join(part for part in (reason, rules) if part)
    if by_rule and verdict == Verdict.EVIDENCE and not (p is not None and p < rule.alpha):
        reason = f"carried by {', '.join(carried)}; {reason}"
    return DatasetVerdict(verdict, p, reason, combined, holm, carried, left_out, by_rule)


def _combined_decision(
    p: float, combined: Sequence[TestOutcome], holm: dict[str, float], rule: DatasetRule
) -> tuple[Verdict, str]:
    """The verdict of the combined p-value, and its sentence."""
    carried = sorted((t for t, q in holm.items() if q < rule.alpha), key=holm.__getitem__)
    smallest = ", ".join(f"{o.test} p={o.p_value:.2g}" for o in sorted(combined, key=_p)[:3])
    over = f"Cauchy combination of {len(combined)} tests of rows seen (smallest: {smallest})"
    if p < rule.alpha:
        carrier = (
            f"carried by {', '.join(carried)} (Holm-adjusted p < {rule.alpha:g})"
            if carried
            else "carried jointly: no single test is below alpha after Holm's adjustment"
        )
        return Verdict.EVIDENCE, f"combined p={p:.3g} < {rule.alpha:g}, {carrier}; {over}"
    if p < rule.weak_alpha:
        return Verdict.AMBIGUOUS, (
            f"combined p={p:.3g}: below weak_alpha={rule.weak_alpha:g} but not "
            f"alpha={rule.alpha:g}; {over}"
        )
    return Verdict.NO_EVIDENCE, f"combined p={p:.3g}: not significant; {over}"


def _p(outcome: TestOutcome) -> float:
    return float(outcome.p_value) if outcome.p_value is not None else 1.0
