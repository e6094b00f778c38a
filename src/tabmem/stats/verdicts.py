"""The verdict rule of the statistics that are not counts of hits: significant *and* large.

A statistic is ``evidence`` only when its p-value is below ``alpha`` and its effect (a
similarity gain, a z-score, an accuracy above a learning baseline) reaches ``min_effect``.
With one of the two it is ``ambiguous`` (significant but small: a real but weak signal; large
but not significant: too few queries to tell); with neither, ``no_evidence``. Counts of right
answers against a data-only rate use the count rule of ``tabmem.stats.hits`` instead, which has
no floor on a rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from tabmem.results import Verdict

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
    large = reaches(effect, min_effect)
    figures = f"{statistic}: effect {effect:+.3f} (minimum {min_effect:g}), p={p_value:.3g}"
    if significant and large:
        return Decision(Verdict.EVIDENCE, f"{figures} < {alpha:g}")
    if significant:
        return Decision(Verdict.AMBIGUOUS, f"{figures} is significant but the effect is small")
    if large:
        return Decision(Verdict.AMBIGUOUS, f"{figures} is large but not significant at {alpha:g}")
    return Decision(Verdict.NO_EVIDENCE, f"{figures}: neither significant nor large")


def reaches(value: float, minimum: float) -> bool:
    """``value >= minimum``, where a rate's difference that is the minimum in decimals counts:
    15 of 25 pairs won is 0.6 - 0.5 = 0.0999... in floating point, not less than 0.1."""
    return value >= minimum or math.isclose(value, minimum, rel_tol=1e-9, abs_tol=1e-12)


def strongest(decisions: Iterable[Decision]) -> Decision:
    """The decision of the statistic with the strongest verdict (the first one on ties)."""
    return max(decisions, key=lambda d: _STRENGTH[d.verdict])
