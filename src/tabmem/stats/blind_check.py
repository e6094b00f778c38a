"""The blind check of the likelihood tests that compare a real row with another row.

Min-K% Prob (a real row against its contrast row) and the twin tests (a real row against the
twin's row at its place: reference ratio, zlib ratio, Min-K%++) count the pairs in which the
model finds the real row likelier. A model that has read no row is no coin flip there: the
other row is drawn from a model of the file (a donor's values, a Gaussian copula), and where
that model misses part of the joint distribution, the real row is the more typical of the two
to anything that knows the domain. So each pair is also put to data-only rules, fitted on the
file (on the whole table it was taken from, where its config names one:
``tabmem.data.population``) without the real row (``ValuePredictors.record_choice``: the
values' frequencies, a nearest-neighbour model, the Gaussian copula's conditional,
gradient-boosted models of each column), and each rule's chance of preferring the real row is
kept with the pair. A rule that scores the whole record is not the test's statistic: Min-K%++
ranks a row by its least expected fields, zlib by its likelihood over its compressed length. So
where the test has a per-row score of per-token log-probabilities, the nearest-neighbour and
the boosted models' per-field log-probabilities (and their distributions' moments) are also put
through it, as two more rules (``NEIGHBOURS_SCORED``, ``BOOSTED_SCORED``).

The baseline is the best one rule's rate on the pairs the model decided (untied), or 1/2
where that is higher; the model's wins are compared with it by the exact binomial tail, and
its rate must lie ``min_margin`` above it.

The best rule per pair is no baseline: with two options it is 1 wherever two rules disagree,
which no model without the rows reaches. A baseline chosen after seeing the pairs is at least
what any of these rules scores there.

The check also says when the file alone explains a high win rate: when the best rule itself,
put through the same rule against a coin flip, would reach ``evidence``. A model that wins no
more than that rule cannot be told from a model that knows the file's distribution; where even
a model that won every pair could not clear the baseline, the cell cannot decide.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from tabmem.data.dataset import Dataset
from tabmem.results import Verdict
from tabmem.stats.best_of import CHANCE, BestOf, FieldStatistic, predictors_of
from tabmem.stats.pvalues import binomial_greater
from tabmem.stats.verdicts import Decision, decide, reaches

EXPLAINED = "the file's distribution alone explains this"
"""The words a cell's reason uses where the best data-only rule alone would be evidence."""


def pair_chances(
    dataset: Dataset,
    pairs: Iterable[tuple[int, str, str]],
    statistic: FieldStatistic | None = None,
) -> dict[int, dict[str, float]]:
    """Per pair (its 1-based data row, the real row's text, the other row's text), each
    data-only rule's chance of preferring the real row, the rules fitted without that row
    (fields read as ``text_columns`` reads them, so the predictors are the other tests'); with
    the test's ``statistic``, also the neighbour and boosted models' field scores put through
    it."""
    predictors = predictors_of(dataset)

    def fields(line: str) -> list[str]:
        return [f.strip() for f in next(csv.reader([line], delimiter=dataset.delimiter))]

    pairs = list(pairs)
    chances = predictors.record_choices(
        [([fields(real), fields(other)], row - 1) for row, real, other in pairs],
        statistic,
        [(real, other) for _, real, other in pairs],
    )
    return {row: chance for (row, _, _), chance in zip(pairs, chances, strict=True)}


@dataclass(frozen=True)
class BlindCheck:
    """The model's ``wins`` on the ``untied`` pairs it decided, beside each data-only rule's
    chances on those pairs (``best``), under the rule: p < ``alpha`` against the baseline and a
    win rate at least ``min_margin`` above it."""

    best: BestOf
    wins: int
    untied: int
    alpha: float
    min_margin: float

    @classmethod
    def of(
        cls,
        chances: Sequence[Mapping[str, float]],
        wins: int,
        alpha: float,
        min_margin: float,
    ) -> BlindCheck:
        """From the chances of the untied pairs (one mapping rule -> chance each)."""
        return cls(BestOf.of(chances), wins, len(chances), alpha, min_margin)

    @property
    def win_rate(self) -> float:
        return self.wins / self.untied if self.untied else 0.5

    @cached_property
    def data_only_rate(self) -> float:
        """The best data-only rule's rate of preferring the real row (a coin flip left out)."""
        rules = {n: a for n, a in self.best.accuracies().items() if n != CHANCE}
        return max(rules.values(), default=0.5) if self.untied else 0.5

    @property
    def baseline(self) -> float:
        """The best data-only rule's rate, or a coin flip's where that is higher."""
        return max(0.5, self.data_only_rate)

    @property
    def set_by(self) -> str:
        """The rule that sets the baseline (``chance`` where no rule reaches a coin flip)."""
        rules = {n: a for n, a in self.best.accuracies().items() if n != CHANCE}
        if not self.untied or not rules or max(rules.values()) < 0.5:
            return CHANCE
        return max(rules, key=rules.__getitem__)

    @property
    def p_value(self) -> float:
        """P(X >= wins) for X ~ Binomial(untied, baseline)."""
        return binomial_greater(self.wins, self.untied, self.baseline)

    @property
    def data_only_wins(self) -> int:
        """The pairs the best rule prefers the real row in, rounded."""
        return round(self.data_only_rate * self.untied)

    @property
    def data_only_p_value(self) -> float:
        """The best rule's own p-value against a coin flip, as if it were the model."""
        return binomial_greater(self.data_only_wins, self.untied, 0.5)

    @property
    def explained(self) -> bool:
        """Whether the best data-only rule alone would reach ``evidence`` against a coin
        flip: the file's distribution is enough for such a win rate."""
        return self.data_only_p_value < self.alpha and reaches(
            self.data_only_rate - 0.5, self.min_margin
        )

    @property
    def within_reach(self) -> bool:
        """Whether a model that won every untied pair would be significant against the
        baseline (p < alpha)."""
        return binomial_greater(self.untied, self.untied, self.baseline) < self.alpha

    def decision(self, statistic: str) -> Decision:
        """The verdict: ``evidence`` when p < alpha and the win rate is ``min_margin`` above
        the baseline, ``ambiguous`` with one of the two, ``no_evidence`` with neither;
        ``not_applicable`` where the file alone explains a win rate that no model could be
        shown to beat on these pairs (not even by winning every one).
        ``statistic`` names what decided each pair."""
        if self.explained and not self.within_reach:
            return Decision(
                Verdict.NOT_APPLICABLE,
                f"{EXPLAINED}: {self.explanation()}; even a model that won every one of "
                f"them would not be significant against that rate at {self.alpha:g}",
            )
        decided = decide(
            f"{statistic}: share of pairs won - the data-only baseline "
            f"({self.best.single_sentence()})",
            self.p_value,
            self.win_rate - self.baseline,
            self.alpha,
            self.min_margin,
        )
        if not self.explained:
            return decided
        if decided.verdict == Verdict.EVIDENCE:
            return Decision(
                decided.verdict,
                f"{decided.reason}; the model wins beyond the best data-only rule, which alone "
                f"would be evidence against a coin flip ({self.explanation()})",
            )
        return Decision(
            decided.verdict,
            f"{decided.reason}; {EXPLAINED}: {self.explanation()}, evidence by itself; only a "
            f"win rate clearly beyond it would say more",
        )

    def explanation(self) -> str:
        return (
            f"the {self.set_by} rule, which has read no row, prefers the real row in "
            f"{self.data_only_rate * self.untied:.3g} of the {self.untied} untied pairs "
            f"({self.data_only_rate:.3f}; p={self.data_only_p_value:.3g} against a coin flip)"
        )

    def metrics(self) -> dict[str, float]:
        """Each rule's rate (``baseline_<rule>``), the best rule's (``data_only_rate``), its
        p-value against a coin flip, and whether that alone would be evidence (1 or 0)."""
        return {
            **self.best.metrics(),
            "data_only_rate": self.data_only_rate,
            "data_only_p_value": self.data_only_p_value,
            "distribution_explains": float(self.explained),
        }

    def info(self) -> dict[str, str]:
        """The rule that sets the baseline and the check in words."""
        return {
            "baseline_set_by": self.set_by,
            "blind_check": (
                f"baseline {self.baseline:.3f}: the rate at which the best data-only rule "
                f"({self.set_by}) prefers the real row on the same {self.untied} untied pairs "
                f"({self.best.single_sentence()}); "
                + (
                    f"{EXPLAINED} (that rule alone would be evidence against a coin flip)"
                    if self.explained
                    else "that rule alone would not be evidence against a coin flip"
                )
            ),
        }


def evidence_rule(statistic: str, alpha: float, min_margin: float) -> str:
    """The rule in words, for a result's ``info``."""
    return (
        f"share of untied pairs where the real row's {statistic} beats the other row's at "
        f"least {min_margin:g} above the baseline (the rate at which the best data-only rule "
        "(the values' frequencies, the Gaussian copula, nearest neighbours and gradient-boosted "
        "models of each column, these two by the whole record and by the test's own score of "
        "a row, each without the real row; a coin flip where higher) prefers the "
        "real row on the same pairs), with an "
        f"exact binomial p < {alpha:g}"
    )
