"""Rows of the file beside rows of its twin, each pair read after the same context: what the
likelihood tests with a reference score (``test=reference_ratio``, ``test=zlib_ratio``).

The twin (``tabmem.data.twin``) writes new rows in the file's exact formats, drawn from a
model of its columns and their dependence, none equal to a real row: rows no model can have
read. Each sampled row of the file is paired with the twin's row at the same place, and both
are scored after the same context (the header and the real rows before the sampled row; the
header alone in a file whose rows run in order, where the rows before a real row would say
what comes next to a model without memory, and no twin row fits its context so). A
model that has read the file finds its real rows likelier, against the reference, than the
twin's rows; a model that has not has no reason to, in so far as the reference takes out what
a model may know of the data without its rows (docs/logprob_tests.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import ScoringTest, Worded
from tabmem.battery.min_k_prob import file_order
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.twin import twin_of
from tabmem.errors import DatasetError
from tabmem.llm.logprobs import ScoreRequest, ScoreResponse
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.contrast import ContrastTable
from tabmem.stats.likelihood import paired_shift_test
from tabmem.stats.verdicts import decide


@dataclass(frozen=True)
class TwinPairSettings(TestSettings):
    """The settings both tests share (their YAML files write each default)."""

    n_rows: int
    context_rows: int
    order_permutations: int
    n_permutations: int
    min_pairs: int
    tie_tolerance: float
    alpha: float
    min_effect: float


@dataclass(frozen=True)
class TwinPair:
    """A data row (1-based ``row``), the twin's row at the same place, and the context (the
    header and the real rows before ``row``) both are read after."""

    row: int
    context: str
    real: str
    twin: str


@dataclass(frozen=True)
class TwinFacts:
    """What the decision records of the twin the pairs came from (its sha256 and rows) and of
    the context the pairs were read after (in words, and the p-value of the file's order
    where it was checked)."""

    twin_sha256: str
    twin_rows: int
    context: str
    file_order_p_value: float | None


def twin_pairs(
    dataset: Dataset, twin: Dataset, n_rows: int, context_rows: int, rng: np.random.Generator
) -> list[TwinPair]:
    """A seeded sample of ``n_rows`` rows (all of them in a smaller file), in file order,
    each with the twin's row at its place and the context both are scored after."""
    rows = dataset.rows
    picked = sorted(rng.choice(len(rows), size=min(n_rows, len(rows)), replace=False).tolist())
    pairs = []
    for index in picked:
        before = [dataset.header, *rows[max(0, index - context_rows) : index]]
        context = dataset.newline.join(before) + dataset.newline
        pairs.append(TwinPair(index + 1, context, rows[index], twin.rows[index]))
    return pairs


def rng_of(seed: int) -> np.random.Generator:
    """The stream that picks the rows and draws the permutations of a cell."""
    return np.random.default_rng(seed)


def score_requests(pair: TwinPair) -> tuple[ScoreRequest, ScoreRequest]:
    """The real row and the twin's row, each scored after the pair's context."""
    return ScoreRequest(pair.real, pair.context), ScoreRequest(pair.twin, pair.context)


def failure(responses: Sequence[ScoreResponse]) -> str | None:
    """Why a pair cannot be scored: a failed score, or a text with no token scored."""
    for response in responses:
        if response.error:
            return response.error
    if any(not response.logprobs for response in responses):
        return "no token was scored"
    return None


def pair_record(
    pair: TwinPair,
    responses: Sequence[ScoreResponse],
    scores: Callable[[], dict[str, float]],
    real_key: str,
    twin_key: str,
) -> QueryRecord:
    """One pair as a record: the figures ``scores`` computes (its ``real_key`` and
    ``twin_key`` are the two scores compared) and whether the real row scored higher (1),
    the same (0.5) or lower (0); a failed pair is a failed query."""
    extra: dict[str, Any] = {"row": pair.row, "twin": pair.twin}
    error = failure(responses)
    if error:
        return QueryRecord(pair.context, pair.real, "", 0.0, error=error, extra=extra)
    extra.update(scores())
    real, twin = extra[real_key], extra[twin_key]
    win = 1.0 if real > twin else 0.5 if real == twin else 0.0
    return QueryRecord(pair.context, pair.real, "", win, extra=extra)


F = TypeVar("F", bound=TwinFacts)


class TwinPairTest(ScoringTest[TwinPair, F]):
    """A test that scores the file's rows against its twin's, pair by pair: the pairs, their
    requests, and the paired decision, which each test gives its own per-row score."""

    statistic: ClassVar[str]  # the per-row score, as the reason names it
    keys: ClassVar[tuple[str, str]]  # the record's figures of the real and the twin row

    def pairs(self, ctx: TestContext) -> tuple[list[TwinPair], TwinFacts] | TestResult:
        """The pairs of a cell and what it records of the twin, or why it has none: a time
        series has no twin, and a file with too few distinct rows cannot draw one."""
        p = ctx.params
        try:
            twin = twin_of(ctx.dataset, ctx.seed)
        except DatasetError as exc:
            return TestResult.not_applicable(
                self.name, f"the file has no twin to compare with: {exc}"
            )
        context_rows, context, order_p = p.context_rows, "the header", None
        if context_rows:
            table = ContrastTable(
                ctx.dataset.rows, ctx.dataset.delimiter, len(ctx.dataset.feature_names)
            )
            order = file_order(ctx.dataset, table, p.order_permutations, p.alpha, ctx.seed)
            order_p = order.p_value
            if order.shows_order:
                context_rows = 0
                context = (
                    f"the header alone: the file is in order ("
                    f"{', '.join(order.ordered_columns) or 'all columns together'}; "
                    f"p={order.p_value:.3g}), so the rows before a real row would tell a model "
                    "without memory what comes next, which no twin row gets"
                )
            else:
                context = f"the header and the {context_rows} real rows before the row"
        pairs = twin_pairs(ctx.dataset, twin, p.n_rows, context_rows, rng_of(ctx.seed))
        if len(pairs) < p.min_pairs:
            return TestResult.not_applicable(
                self.name, f"the file has {len(pairs)} rows; the test needs {p.min_pairs} pairs"
            )
        record = twin.spec.extra["twin"]
        return pairs, TwinFacts(str(record["sha256"]), int(record["rows"]), context, order_p)

    def word(self, ctx: TestContext, queries: Sequence[TwinPair], facts: F) -> Worded[TwinPair]:
        return Worded(list(queries), [score_requests(pair) for pair in queries])

    def shift(
        self,
        ctx: TestContext,
        facts: F,
        records: Sequence[QueryRecord],
        info: dict[str, Any],
    ) -> TestResult:
        """The decision: the paired sign-flip test that the real rows' scores are higher than
        their twin rows', and the verdict rule of ``tabmem.stats.verdicts`` on its p-value
        and effect (the mean difference over its standard deviation)."""
        p = ctx.params
        scored = [r for r in records if r.error is None]
        info = {
            **info,
            "twin_sha256": facts.twin_sha256,
            "context": facts.context,
            "prompt_form": "log-probabilities",
        }
        if len(scored) < p.min_pairs:
            return TestResult.not_applicable(
                self.name,
                f"only {len(scored)} pairs were scored; the others failed; the test needs "
                f"{p.min_pairs}",
                info=info,
                records=records,
            )
        first, second = self.keys
        real = [r.extra[first] for r in scored]
        twin = [r.extra[second] for r in scored]
        rng = rng_of(ctx.seed + 1)
        shift = paired_shift_test(real, twin, p.n_permutations, rng, p.tie_tolerance)
        if shift.wins + shift.losses < p.min_pairs:
            # no verdict could come of it: a reference with the model's own weights (the lab's
            # base checkpoint against its base model) scores every pair as the model does
            return TestResult.not_applicable(
                self.name,
                f"only {shift.wins + shift.losses} of {shift.n} pairs differ in "
                f"{self.statistic} by more than {p.tie_tolerance:g} ({shift.ties} tied: a "
                f"reference with the model's own weights scores every row as the model does); "
                f"the test needs {p.min_pairs}",
                info=info,
                records=records,
            )
        decision = decide(self.statistic, shift.p_value, shift.effect, p.alpha, p.min_effect)
        return TestResult(
            test=self.name,
            verdict=decision.verdict,
            reason=(
                f"the real row scored higher in {shift.wins} of {shift.wins + shift.losses} "
                f"untied pairs ({shift.ties} tied) of {shift.n}, by {shift.mean:+.3g} on "
                f"average (sd {shift.sd:.3g}); {decision.reason}"
            ),
            n_queries=len(records),
            n_hits=shift.wins,
            rate=shift.win_rate,
            baseline=0.5,
            p_value=shift.p_value,
            metrics={
                "mean_difference": shift.mean,
                "sd_difference": shift.sd,
                "effect": shift.effect,
                "pairs_scored": shift.n,
                "pairs_won": shift.wins,
                "pairs_lost": shift.losses,
                "pairs_tied": shift.ties,
                "win_rate": shift.win_rate,
                "sign_test_p_value": shift.sign_p_value,
                "n_permutations": shift.n_permutations,
                "twin_rows": facts.twin_rows,
                **(
                    {}
                    if facts.file_order_p_value is None
                    else {"file_order_p_value": facts.file_order_p_value}
                ),
                f"mean_{first}": float(np.mean(real)),
                f"mean_{second}": float(np.mean(twin)),
            },
            info={
                **info,
                "evidence_rule": (
                    f"the real rows' {self.statistic} above their twin rows' by a mean "
                    f"difference of at least {p.min_effect:g} standard deviations, with a "
                    f"one-sided sign-flip permutation p < {p.alpha:g} ({p.n_permutations} draws)"
                ),
            },
            records=list(records),
        )
