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
- **Tests enter as what they decided**: a test's p-value enters no lower than its own verdict
  allows, at least ``alpha`` for an ``ambiguous`` test (p < its alpha from too few hits, or an
  effect guard that failed) and at least ``weak_alpha`` for a ``no_evidence`` one. Raising
  p-values keeps the combination valid (each stays at least uniform under the null) and only
  makes it more conservative: one ambiguous p of 5e-4 among nine silent tests does not make
  ``evidence``.
- **Holm's step-down procedure** names the tests that carry the evidence: those whose
  Holm-adjusted p-value (of the p-values that entered) is below ``alpha`` keep family-wise
  error control on their own.

The dataset verdict: ``evidence`` when the combined p-value is below ``alpha``, ``ambiguous``
below ``weak_alpha``, else ``no_evidence``; ``not_applicable`` when no test of rows seen could
decide (each says why in the reason). A test that decided without a p-value is left out, with
the reason.

Over a grid, each dataset verdict holds its own level; ``benjamini_hochberg`` gives each its
q-value over the grid's verdicts, so that calling ``evidence`` only where q < ``alpha`` keeps the
false discovery rate among them at ``alpha`` (``grid_q_sentence`` says so in one line).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tabmem.results import CellResult, Verdict

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


def benjamini_hochberg(p_values: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg q-values, in the order given: the smallest level at which each
    hypothesis is rejected while the false discovery rate stays at that level (valid for
    independent or positively dependent p-values). A None (no p-value) stays None and does not
    count among the hypotheses."""
    found = [i for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    order = sorted(found, key=lambda i: float(p_values[i]))  # type: ignore[arg-type]
    q: list[float | None] = [None] * len(p_values)
    running = 1.0
    for rank in range(len(order), 0, -1):
        i = order[rank - 1]
        running = min(running, len(order) * float(p_values[i]) / rank)  # type: ignore[arg-type]
        q[i] = running
    return q


def grid_q_sentence(n: int, alpha: float) -> str:
    """The error rate a grid's q-values control, in one line, for ``n`` verdicts at ``alpha``."""
    return (
        f"grid q: Benjamini-Hochberg over the {n} dataset verdicts with a p-value; evidence "
        f"where q < {alpha:g} keeps the false discovery rate among them at {alpha:g}"
    )


@dataclass(frozen=True)
class DatasetRule:
    """The thresholds of the dataset verdict (``dataset_verdict`` in ``conf/config.yaml``)."""

    alpha: float = 0.01
    weak_alpha: float = 0.05


@dataclass
class DatasetVerdict:
    """The combined verdict of one model on one file, and what it rests on.

    ``combined`` are the tests whose p-values entered the combination, ``entered`` the
    p-value each entered with (its own, raised to what its verdict allows: ``entered_p``),
    ``holm`` their Holm-adjusted p-values, ``carried_by`` those below ``alpha`` after Holm's
    adjustment (the tests that carry the evidence on their own), ``left_out`` the tests that
    could not decide, or decided without a p-value, and why; ``rule`` the thresholds it was
    decided at.
    """

    verdict: Verdict
    p_value: float | None
    reason: str
    combined: list[CellResult] = field(default_factory=list)
    holm: dict[str, float] = field(default_factory=dict)
    carried_by: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    entered: dict[str, float] = field(default_factory=dict)
    rule: DatasetRule = field(default_factory=DatasetRule)


DECIDED = (Verdict.EVIDENCE, Verdict.AMBIGUOUS, Verdict.NO_EVIDENCE)


def _has_p(outcome: CellResult) -> bool:
    return outcome.p_value is not None and not math.isnan(outcome.p_value)


def entered_p(outcome: CellResult, rule: DatasetRule) -> float:
    """The p-value a decided test enters the combination with: its own, raised to at least
    ``alpha`` where it called itself ``ambiguous`` and ``weak_alpha`` where ``no_evidence``, so
    that no test weighs more in the combination than its own verdict allows."""
    floor = {Verdict.AMBIGUOUS: rule.alpha, Verdict.NO_EVIDENCE: rule.weak_alpha}
    own = float(outcome.p_value)  # type: ignore[arg-type]
    return max(own, floor.get(Verdict(outcome.verdict), 0.0))


def decide_dataset(outcomes: Sequence[CellResult], rule: DatasetRule) -> DatasetVerdict:
    """Combine the tests of rows seen of one model × file into its dataset verdict.

    Each decided test enters with ``entered_p``; a test that decided without a p-value (a run
    of the header test from before it had one) is left out with that reason.
    """
    decided = [o for o in outcomes if o.verdict in DECIDED]
    combined = [o for o in decided if _has_p(o)]
    left_out = {
        o.test: (o.reason or f"verdict {o.verdict}") for o in outcomes if o.verdict not in DECIDED
    }
    without_p = "without a p-value (a run from before its test had one)"
    left_out.update({o.test: f"{o.verdict} {without_p}" for o in decided if not _has_p(o)})
    if not combined:
        why = "; ".join(f"{test}: {reason}" for test, reason in left_out.items())
        return DatasetVerdict(
            Verdict.NOT_APPLICABLE,
            None,
            "no test of rows seen could decide" + (f" ({why})" if why else ""),
            left_out=left_out,
            rule=rule,
        )
    entered = {o.test: entered_p(o, rule) for o in combined}
    p_values = list(entered.values())
    p = cauchy_combination(p_values)
    holm = dict(zip(entered, holm_adjusted(p_values), strict=True))
    carried = sorted((t for t, q in holm.items() if q < rule.alpha), key=holm.__getitem__)
    verdict, reason = _combined_decision(p, combined, entered, carried, rule)
    return DatasetVerdict(verdict, p, reason, combined, holm, carried, left_out, entered, rule)


def _combined_decision(
    p: float,
    combined: Sequence[CellResult],
    entered: dict[str, float],
    carried: Sequence[str],
    rule: DatasetRule,
) -> tuple[Verdict, str]:
    """The verdict of the combined p-value, and its sentence."""
    smallest = ", ".join(
        _entered_text(o, entered[o.test])
        for o in sorted(combined, key=lambda o: entered[o.test])[:3]
    )
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


def _entered_text(outcome: CellResult, entered: float) -> str:
    """``test p=…``, with the test's own p and verdict where the p that entered is higher."""
    own = float(outcome.p_value)  # type: ignore[arg-type]
    raised = f" (own p={own:.2g}, {outcome.verdict})" if entered > own else ""
    return f"{outcome.test} p={entered:.2g}{raised}"
