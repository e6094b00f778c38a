"""zlib ratio test: does the model write the file's rows shorter than zlib does, more so than
its twin's rows?

zlib has read nothing, so the ratio of the bits a model needs for a row to the bits zlib needs
for it takes out what makes a row long or short to write (its length, digits, repeated words)
and keeps what the model knows of it (Carlini et al. 2021 ranked memorized texts this way).
For a seeded sample of rows, each real row and the twin's row at its place are scored by the
model after the same context (``battery.twin_pairs``); the score of a row is minus its model
bits over its zlib bits, and the pairs the real row wins are compared with the rate at which
the best data-only rule prefers it on the same pairs (the blind check,
``tabmem.stats.blind_check``; the paired sign-flip test of the scores is reported beside it).

zlib knows nothing of the data's distribution, so against a coin flip the null ("real rows are
no likelier than their compression predicts, compared with twin rows") also fails for a model
that knows the domain better than the twin's trees do; the blind check's baseline
takes out as much of that as the data-only rules see, and the reference ratio test
(``test=reference_ratio``) what a reference model knows (docs/logprob_tests.md).
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
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.best_of import FieldStatistic
from tabmem.stats.likelihood import Triple, model_bits, zlib_bits, zlib_score


@dataclass(frozen=True)
class ZlibRatioSettings(TwinPairSettings):
    """``conf/test/zlib_ratio.yaml``."""


@register_lifecycle
class ZlibRatio(TwinPairTest[TwinFacts]):
    """Real rows against twin rows, each scored by the model's bits over zlib's."""

    name = "zlib_ratio"
    claims = "rows_seen"
    title = "zlib ratio"
    settings = ZlibRatioSettings
    statistic = "model bits over zlib bits (negated)"
    keys = ("score_real", "score_twin")

    def plan(self, ctx: TestContext) -> tuple[list[TwinPair], TwinFacts] | TestResult:
        return self.pairs(ctx)

    def field_statistic(self, params: ZlibRatioSettings) -> FieldStatistic:
        def score(triples: Sequence[Triple], text: str) -> float:
            return zlib_score([t[0] for t in triples], text)

        return score

    def score(self, ctx: TestContext, facts: TwinFacts, answer: Answer[TwinPair]) -> QueryRecord:
        pair = answer.query
        real, twin = answer.response

        def scores() -> dict[str, float]:
            return {
                "bits_real": model_bits(real.logprobs),
                "bits_twin": model_bits(twin.logprobs),
                "zlib_bits_real": zlib_bits(pair.real),
                "zlib_bits_twin": zlib_bits(pair.twin),
                "score_real": zlib_score(real.logprobs, pair.real),
                "score_twin": zlib_score(twin.logprobs, pair.twin),
            }

        return pair_record(
            pair, answer.response, scores, self.keys, facts, answer.request, ctx.dataset
        )

    def decide(
        self,
        ctx: TestContext,
        facts: TwinFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        return self.shift(
            ctx, facts, records, {"reference": "zlib, level 9, of the row alone"}, context
        )
