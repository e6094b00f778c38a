"""Hits beyond what a model without the rows reaches at its best: the rule of the count tests.

A test of rows seen counts the queries a model answers right (its hits) and compares them with
the rate that a data-only model reaches *at its best* on such queries: the accuracy of the best
predictor fitted on the file alone (cross-fitted, so no predictor learnt the row it predicts),
or chance where that is higher. A model without the rows can reach that rate; it cannot be
right for sure where the predictor happens to be right *and* at chance where it is wrong, which
needs the rows. Under the null, the hits are at most Binomial(n, baseline); the p-value is its
exact upper tail.

The verdict:

- ``evidence``: p < ``alpha`` and at least ``min_hits`` hits. The floor on hits matters only
  where the baseline is near zero, where a single exact row would otherwise be enough.
- ``ambiguous``: short of that, p < ``weak_alpha`` (a signal too weak to call: more queries
  tell), or p < ``alpha`` from fewer than ``min_hits`` hits.
- ``no_evidence``: neither.

There is no floor on the rate itself: at a fixed rate above the baseline, more queries only
make the verdict stronger (a model that reproduces 9 % of rows gets ``evidence`` once it has
been asked enough). The reason says how much was found: the share of rows beyond the baseline,
(rate - b) / (1 - b), which is what a model that recalls that share of the rows and otherwise
answers like the best data-only predictor scores, with the 95 % interval mapped from the
Clopper-Pearson interval of the rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from tabmem.results import Verdict
from tabmem.stats.pvalues import binomial_greater, clopper_pearson
from tabmem.stats.verdicts import Decision


@dataclass(frozen=True)
class CountRule:
    """The thresholds of the count rule, as a test's settings give them."""

    alpha: float
    weak_alpha: float
    min_hits: int


@dataclass(frozen=True)
class HitCount:
    """``hits`` right answers of ``n`` queries against a data-only ``baseline`` rate."""

    hits: int
    n: int
    baseline: float

    @property
    def rate(self) -> float:
        return self.hits / self.n if self.n else 0.0

    @property
    def expected(self) -> float:
        """The hits a data-only model at its best would score on average."""
        return self.n * self.baseline

    @property
    def p_value(self) -> float:
        """Exact one-sided binomial p-value of this many hits or more at the baseline rate."""
        return binomial_greater(self.hits, self.n, self.baseline)

    def share(self) -> float:
        """The estimated share of rows known beyond the baseline, (rate - b) / (1 - b) in [0, 1]."""
        return _beyond(self.rate, self.baseline)

    def share_interval(self, level: float = 0.95) -> tuple[float, float]:
        """The share's interval, mapped from the Clopper-Pearson interval of the rate."""
        low, high = clopper_pearson(self.hits, self.n, level)
        return _beyond(low, self.baseline), _beyond(high, self.baseline)

    def figures(self) -> str:
        """The count, the baseline and the share beyond it, as the verdict's reason gives them."""
        low, high = self.share_interval()
        return (
            f"{self.hits}/{self.n} against {self.expected:.2f} expected from a data-only "
            f"model at its best (baseline rate {self.baseline:.3f}); share of rows beyond the "
            f"baseline {self.share():.2f} (95% CI {low:.2f} to {high:.2f})"
        )


def _beyond(rate: float, baseline: float) -> float:
    if baseline >= 1.0:
        return 0.0
    return min(1.0, max(0.0, (rate - baseline) / (1.0 - baseline)))


def decide_hits(what: str, count: HitCount, rule: CountRule, p_value: float) -> Decision:
    """The count rule on ``count`` with ``p_value`` (its own, or one adjusted for several
    statistics); ``what`` names the hits in the reason."""
    figures = f"{what}: {count.figures()}, p={p_value:.3g}"
    if p_value < rule.alpha and count.hits >= rule.min_hits:
        return Decision(Verdict.EVIDENCE, f"{figures} < {rule.alpha:g}")
    if p_value < rule.alpha:
        return Decision(
            Verdict.AMBIGUOUS,
            f"{figures} is significant, but from fewer than min_hits={rule.min_hits} hits",
        )
    if p_value < rule.weak_alpha:
        return Decision(
            Verdict.AMBIGUOUS,
            f"{figures}: below weak_alpha={rule.weak_alpha:g} but not alpha={rule.alpha:g}; "
            "more queries can tell",
        )
    return Decision(Verdict.NO_EVIDENCE, f"{figures}: not significant")


def unreachable_reason(n: int, baseline: float, rule: CountRule, what: str) -> str:
    """Why even a model right on all ``n`` queries could not reach ``evidence`` against the
    baseline ("" when it could)."""
    if n <= 0:
        return f"no query about {what} could be asked"
    if n < rule.min_hits:
        return f"only {n} queries about {what} can be asked, fewer than min_hits={rule.min_hits}"
    best = HitCount(n, n, baseline).p_value
    if best >= rule.alpha:
        return (
            f"the data-only baseline gets {what} right at a rate of {baseline:.3f}, so even "
            f"{n} right answers of {n} would give p={best:.3g}, not below {rule.alpha:g}"
        )
    return ""
