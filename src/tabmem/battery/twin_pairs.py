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
a model may know of the data without its rows.

The twin is a model of the file, and where it misses part of the joint distribution the real
row is the more typical of a pair to anything that knows the domain. So the pairs won are not
compared with a coin flip but with the blind check of ``tabmem.stats.blind_check``, as Min-K%
Prob's are: the rate at which the best data-only rule, fitted without the real row, prefers
the real row on the same pairs (docs/logprob_tests.md).
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
from tabmem.stats.blind_check import BlindCheck, evidence_rule, pair_chances
from tabmem.stats.contrast import ContrastTable
from tabmem.stats.likelihood import paired_shift_test


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
    min_win_rate: float


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
    """What the decision records of the twin the pairs came from (its sha256 and rows), of
    the context the pairs were read after (in words, and the p-value of the file's order
    where it was checked), and each pair's data-only rules' chances of preferring the real
    row (by 1-based row; ``tabmem.stats.blind_check``)."""

    twin_sha256: str
    twin_rows: int
    context: str
    file_order_p_value: float | None
    chances: dict[int, dict[str, float]]


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
    keys: tuple[str, str],
    facts: TwinFacts,
) -> QueryRecord:
    """One pair as a record: the figures ``scores`` computes (``keys`` names the real row's
    and the twin row's of the two scores compared), the data-only rules' chances of preferring
    the real row (``baseline_chances``), and whether the real row scored higher (1), the same
    (0.5) or lower (0); a failed pair is a failed query."""
    real_key, twin_key = keys
    extra: dict[str, Any] = {
        "row": pair.row,
        "twin": pair.twin,
        "baseline_chances": facts.chances[pair.row],
    }
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
        chances = pair_chances(ctx.dataset, [(q.row, q.real, q.twin) for q in pairs])
        facts = TwinFacts(str(record["sha256"]), int(record["rows"]), context, order_p, chances)
        return pairs, facts

    def word(self, ctx: TestContext, queries: Sequence[TwinPair], facts: F) -> Worded[TwinPair]:
        return Worded(list(queries), [score_requests(pair) for pair in queries])

    def shift(
        self,
        ctx: TestContext,
        facts: F,
        records: Sequence[QueryRecord],
        info: dict[str, Any],
    ) -> TestResult:
        """The decision: the real rows' wins against the blind check's baseline (the best
        data-only rule's rate of preferring the real row on the same untied pairs; exact
        binomial, ``tabmem.stats.blind_check``), with the paired sign-flip test of the scores'
        differences and their effect (mean over sd) reported beside it."""
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
        untied = [
            r.extra["baseline_chances"]
            for r, a, b in zip(scored, real, twin, strict=True)
            if abs(a - b) > p.tie_tolerance
        ]
        margin = p.min_win_rate - 0.5
        blind = BlindCheck.of(untied, shift.wins, p.alpha, margin)
        decision = blind.decision(self.statistic)
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
            baseline=blind.baseline,
            p_value=blind.p_value,
            metrics={
                **blind.metrics(),
                "mean_difference": shift.mean,
                "sd_difference": shift.sd,
                "effect": shift.effect,
                "pairs_scored": shift.n,
                "pairs_won": shift.wins,
                "pairs_lost": shift.losses,
                "pairs_tied": shift.ties,
                "win_rate": shift.win_rate,
                "sign_flip_p_value": shift.p_value,
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
                **blind.info(),
                "evidence_rule": evidence_rule(self.statistic, p.alpha, margin),
            },
            records=list(records),
        )
