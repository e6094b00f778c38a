"""Statistics of the multiple-choice probes (Silvestri et al. 2025): which attributes to ask
about, what a model that knows only the marginal distributions would score, and the verdict.

- Attributes are ranked by the entropy of their values in the file: an attribute whose value
  is hard to guess from its distribution alone (many values, none dominant; for numbers, a wide
  spread at the file's precision) is where recognising a record pays most.
- The *frequency rule* picks the option whose values are most frequent in the file (for whole
  records: the largest sum of log frequencies); its expected accuracy on the very questions
  asked, ties split evenly, is what knowledge of the marginals alone buys.
- The *data-only rule* picks the option a nearest-neighbour model of the file, fitted without
  the asked record, finds most likely given the rest of the record
  (``NeighbourModel.choice_scores``): what knowledge of the joint distribution buys. Real
  records are more plausible than records with values from other rows, so this rule beats
  chance on most files without having seen any record asked about.
- The *copula rule* picks the option the Gaussian copula of the file, fitted without the asked
  record, finds most likely (``ValuePredictors.copula_scores`` in ``tabmem.stats.best_of``).
- The verdict compares the accuracy with what a model without the records reaches at its
  best, per question (``tabmem.stats.best_of``): the best of chance 1 / (number of options)
  and each rule's chance of picking the right option there, averaged over the questions asked
  (the exact binomial tail and the count rule of ``tabmem.stats.hits``); the binomial p-value
  against chance alone is kept as a figure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tabmem.results import Verdict
from tabmem.stats.hits import CountRule, HitCount, decide_hits
from tabmem.stats.pvalues import binomial_greater, clopper_pearson


def entropy_bits(values: Sequence[str]) -> float:
    """Shannon entropy (bits) of the empirical distribution of ``values`` (empty is a value)."""
    counts = Counter(values)
    total = sum(counts.values())
    if total == 0:
        return 0.0
    return -sum(c / total * math.log2(c / total) for c in counts.values())


def attribute_pool(
    columns: Sequence[Sequence[str]], needed: int, min_distinct: int, fraction: float
) -> list[int]:
    """Indices of the highest-entropy columns with ``min_distinct`` distinct non-empty values
    or more: the top ``fraction`` of all columns, and ``needed`` at least (when there are)."""
    eligible = [j for j, c in enumerate(columns) if len({v for v in c if v}) >= min_distinct]
    ranked = sorted(eligible, key=lambda j: (-entropy_bits(columns[j]), j))
    size = max(needed, math.ceil(fraction * len(columns)))
    return ranked[:size]


def log_frequency(counts: Counter[str], value: str) -> float:
    """log of the share of rows holding ``value`` (add-one smoothed, so unseen values count)."""
    total = sum(counts.values())
    return math.log((counts.get(value, 0) + 1) / (total + 1))


def frequency_rule_hit(scores: Sequence[float], correct: int) -> float:
    """Expected hit of picking the highest-scoring option, ties broken uniformly at random."""
    best = max(scores)
    tied = [i for i, s in enumerate(scores) if math.isclose(s, best, rel_tol=0, abs_tol=1e-12)]
    return 1.0 / len(tied) if correct in tied else 0.0


@dataclass(frozen=True)
class ChoiceSummary:
    """Accuracy of ``hits`` right answers of ``n`` questions with ``n_options`` options each."""

    hits: int
    n: int
    n_options: int

    @property
    def chance(self) -> float:
        return 1.0 / self.n_options

    @property
    def rate(self) -> float:
        return self.hits / self.n if self.n else 0.0

    @property
    def p_value(self) -> float:
        """One-sided binomial p-value of ``hits`` or more right answers at the chance rate."""
        return binomial_greater(self.hits, self.n, self.chance)

    @property
    def interval(self) -> tuple[float, float]:
        """95 % Clopper–Pearson interval of the accuracy."""
        return clopper_pearson(self.hits, self.n)


def choice_verdict(summary: ChoiceSummary, count: HitCount, rule: CountRule) -> tuple[Verdict, str]:
    """``evidence`` when the accuracy beats the baseline by the count rule (whether that can
    happen at all is checked before asking)."""
    what = f"right options (chance {summary.chance:.2f}, or the data-only rules where higher)"
    decision = decide_hits(what, count, rule, count.p_value)
    return decision.verdict, decision.reason
