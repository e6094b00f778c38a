"""Min-K%++ test: are the file's rows more familiar to the model, token by token against what it
expects at each position, than rows of its twin?

Min-K%++ (Zhang et al. 2024) standardises each token's log-probability by the model's own
distribution at its position: (log p(token) - mean) / sd, the mean and sd of log p(z) for z
drawn from that distribution. A position where the model hesitates among many tokens and one
where it is sure become comparable, so a row's score (the mean of its k% lowest standardised
tokens) says how far its least expected tokens fall below a typical draw, not how rare its
values are. For a seeded sample of rows, each real row and the twin's row at its place are
scored after the same context (``battery.twin_pairs``), and the pairs the real row wins are
compared with the rate at which the best data-only rule prefers it on the same pairs (the
blind check, ``tabmem.stats.blind_check``); the paired sign-flip permutation test of the
scores' differences is reported beside it.

The moments need the model's whole distribution at each token: a backend with the logits in
hand (transformers); any other model is ``not_applicable`` with the reason
(docs/logprob_tests.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, register_lifecycle
from tabmem.battery.twin_pairs import (
    TwinFacts,
    TwinPair,
    TwinPairSettings,
    TwinPairTest,
    pair_record,
)
from tabmem.llm.moments import has_moments, no_moments_reason
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.best_of import FieldStatistic
from tabmem.stats.likelihood import Triple, min_k_plus_plus_score


@dataclass(frozen=True)
class MinKPlusPlusSettings(TwinPairSettings):
    """``conf/test/min_k_plus_plus.yaml``."""

    k_percent: float


@register_lifecycle
class MinKPlusPlus(TwinPairTest[TwinFacts]):
    """Real rows against twin rows, each scored by its Min-K%++ score."""

    name = "min_k_plus_plus"
    claims = "rows_seen"
    title = "Min-K%++"
    settings = MinKPlusPlusSettings
    statistic = "Min-K%++ score"
    keys = ("score_real", "score_twin")
    moments = True

    def plan(self, ctx: TestContext) -> tuple[list[TwinPair], TwinFacts] | TestResult:
        return self.pairs(ctx)

    def field_statistic(self, params: MinKPlusPlusSettings) -> FieldStatistic:
        def score(triples: Sequence[Triple], text: str) -> float:
            logs, means, sds = zip(*triples, strict=True)
            return min_k_plus_plus_score(logs, means, sds, params.k_percent)

        return score

    def run_planned(
        self, ctx: TestContext, queries: list[TwinPair], facts: TwinFacts
    ) -> TestResult:
        """The pairs scored with moments, or ``not_applicable`` on a model that gives
        log-probabilities without them (checked per model: a calibration shares one plan)."""
        model = ctx.model_for("Asking")
        if not has_moments(model.backend):
            return TestResult.not_applicable(self.name, no_moments_reason(model))
        return super().run_planned(ctx, queries, facts)

    def score(self, ctx: TestContext, facts: TwinFacts, answer: Answer[TwinPair]) -> QueryRecord:
        real, twin = answer.response
        k = ctx.params.k_percent

        def scores() -> dict[str, float]:
            return {
                "score_real": min_k_plus_plus_score(real.logprobs, real.means, real.sds, k),
                "score_twin": min_k_plus_plus_score(twin.logprobs, twin.means, twin.sds, k),
                "tokens_real": len(real.logprobs),
                "tokens_twin": len(twin.logprobs),
            }

        return pair_record(
            answer.query, answer.response, scores, self.keys, facts, answer.request, ctx.dataset
        )

    def decide(
        self,
        ctx: TestContext,
        facts: TwinFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        k = ctx.params.k_percent
        score = (
            f"the mean of the lowest {k:g}% of a row's tokens' log-probabilities, each less "
            "the mean and over the sd of log p over the vocabulary at its position"
        )
        return self.shift(ctx, facts, records, {"score": score}, context)
