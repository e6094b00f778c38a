"""The verdict rule shared by the memorization tests: significant *and* large enough.

A statistic is ``evidence`` only when its p-value is below ``alpha`` and its effect (the
model's rate or similarity above the data-only baseline) reaches ``min_effect``. With one
of the two it is ``ambiguous`` (significant but small: a real but weak signal; large but
not significant: too few queries to tell); with neither, ``no_evidence``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tabmem.results import Verdict
from tabmem.stats.pvalues import best_possible_p

_STRENGTH = {Verdict.NO_EVIDENCE: 0, Verdict.AMBIGUOUS: 1, Verdict.EVIDENCE: 2}


@dataclass(frozen=True)
class Decision:
    """A verdict for one statistic and the sentence that explains it."""

    verdict: Verdict
    reason: str


def decide(
    statistic: str, p_value: float, effect: float, alpha: float, min_effect: float
) -> Decision:
    """Apply the rule to one statistic; ``statistic`` names it in the reason sentence."""
    significant = p_value < alpha
    large = effect >= min_effect
    figures = f"{statistic}: effect {effect:+.3f} (minimum {min_effect:g}), p={p_value:.3g}"
    if significant and large:
        return Decision(Verdict.EVIDENCE, f"{figures} < {alpha:g}")
    if significant:
        return Decision(Verdict.AMBIGUOUS, f"{figures} is significant but the effect is small")
    if large:
        return Decision(Verdict.AMBIGUOUS, f"{figures} is large but not significant at {alpha:g}")
    return Decision(Verdict.NO_EVIDENCE, f"{figures}: neither significant nor large")


def strongest(decisions: Iterable[Decision]) -> Decision:
    """The decision of the statistic with the strongest verdict (the first one on ties)."""
    return max(decisions, key=lambda d: _STRENGTH[d.verdict])


def no_power_reason(
    statistic: str, n: int, baseline: float, alpha: float, min_effect: float
) -> str:
    """Why a test cannot reach ``evidence`` on this file, or "" when it can.

    It cannot when even ``n`` hits out of ``n`` would not be significant against the baseline,
    or when a perfect rate would not exceed the baseline by ``min_effect``.
    """
    if 1.0 - baseline < min_effect:
        return (
            f"the data-only baseline already gets {statistic} right at a rate of {baseline:.3f}, "
            f"leaving less than the minimum effect {min_effect:g}"
        )
    best = best_possible_p(n, baseline)
    if best >= alpha:
        return (
            f"the data-only baseline gets {statistic} right at a rate of {baseline:.3f}, so even "
            f"{n} hits of {n} would give p={best:.3g}, not below {alpha:g}"
        )
    return ""
