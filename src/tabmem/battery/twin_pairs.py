"""Rows of the file beside rows of its twin, each pair read after the same context: what the
likelihood tests with a reference score (``test=reference_ratio``, ``test=zlib_ratio``).

The twin (``tabmem.data.twin``) writes new rows in the file's exact formats, drawn from a
model of its columns and their dependence, none equal to a real row: rows no model can have
read. Every row of the file (up to the cap ``n_rows``, sampled above it) is paired with the
twin's row at the same place, and both are scored after the same context: the header and the
real rows before the row, read in passes over the file (``battery.file_pass``: the twin row is
read in its real row's place after exactly the prefix the real row had); the header alone in a
file whose rows run in order, where the rows before a real row would say what comes next to a
model without memory, and no twin row fits its context so. A
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
from tabmem.battery.file_pass import (
    FileRead,
    RowRead,
    RowTexts,
    read_figures,
    read_file,
    rows_sentence,
    sample_rows,
    scored_reads,
    token_counter,
)
from tabmem.battery.lifecycle import ScoringTest, Worded, wording_figures
from tabmem.battery.min_k_prob import file_order
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.twin import twin_of
from tabmem.errors import DatasetError
from tabmem.llm.logprobs import ScoreResponse
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.best_of import FieldStatistic
from tabmem.stats.blind_check import BlindCheck, evidence_rule, pair_chances
from tabmem.stats.contrast import ContrastTable
from tabmem.stats.likelihood import paired_shift_test


@dataclass(frozen=True)
class TwinPairSettings(TestSettings):
    """The settings both tests share (their YAML files write each default)."""

    n_rows: int
    context_rows: int
    window_tokens: int
    order_permutations: int
    n_permutations: int
    min_pairs: int
    tie_tolerance: float
    alpha: float
    min_win_rate: float


@dataclass(frozen=True)
class TwinPair:
    """A data row (1-based ``row``) and the twin's row at the same place; both are read after
    the same context (``battery.file_pass``)."""

    row: int
    real: str
    twin: str


@dataclass(frozen=True)
class TwinFacts:
    """What the decision records of the twin the pairs came from (its sha256 and rows), of
    the context the pairs were read after (in words, whether it is the header alone, and the
    p-value of the file's order where it was checked), each pair's data-only rules' chances of
    preferring the real row (by 1-based row; ``tabmem.stats.blind_check``), and which rows
    were scored (in words)."""

    twin_sha256: str
    twin_rows: int
    context: str
    file_order_p_value: float | None
    chances: dict[int, dict[str, float]]
    header_only: bool
    rows: str


def twin_pairs(
    dataset: Dataset, twin: Dataset, n_rows: int, rng: np.random.Generator
) -> list[TwinPair]:
    """Every row up to ``n_rows`` (a seeded sample above it: ``file_pass.sample_rows``), in
    file order, each with the twin's row at its place."""
    rows = dataset.rows
    picked = sample_rows(len(rows), n_rows, rng)
    return [TwinPair(index + 1, rows[index], twin.rows[index]) for index in picked]


def rng_of(seed: int) -> np.random.Generator:
    """The stream that picks the rows and draws the permutations of a cell."""
    return np.random.default_rng(seed)


def pair_reads(ctx: TestContext, pairs: Sequence[TwinPair], facts: TwinFacts) -> FileRead:
    """The passes that read the pairs: each twin row in its real row's place, after the same
    prefix (``battery.file_pass``)."""
    p = ctx.params
    model = ctx.model_for("Wording")
    window = min(p.window_tokens, model.context_window) if p.window_tokens > 0 else 0
    items = [RowTexts(pair.row - 1, (pair.twin,)) for pair in pairs]
    return read_file(
        ctx.dataset, items, token_counter(model), window, p.context_rows, facts.header_only
    )


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
    where: RowRead,
    dataset: Dataset,
) -> QueryRecord:
    """One pair as a record: the figures ``scores`` computes (``keys`` names the real row's
    and the twin row's of the two scores compared), the data-only rules' chances of preferring
    the real row (``baseline_chances``), the rows of context it was read after, and whether the
    real row scored higher (1), the same (0.5) or lower (0); a failed pair is a failed query."""
    real_key, twin_key = keys
    extra: dict[str, Any] = {
        "row": pair.row,
        "twin": pair.twin,
        "context_rows": where.read.context_rows(where.row),
        "baseline_chances": facts.chances[pair.row],
    }
    prompt = where.read.prompt(dataset, where.row)
    error = failure(responses)
    if error:
        return QueryRecord(prompt, pair.real, "", 0.0, error=error, extra=extra)
    extra.update(scores())
    real, twin = extra[real_key], extra[twin_key]
    win = 1.0 if real > twin else 0.5 if real == twin else 0.0
    return QueryRecord(prompt, pair.real, "", win, extra=extra)


F = TypeVar("F", bound=TwinFacts)


class TwinPairTest(ScoringTest[TwinPair, F]):
    """A test that scores the file's rows against its twin's, pair by pair: the pairs, their
    requests, and the paired decision, which each test gives its own per-row score."""

    statistic: ClassVar[str]  # the per-row score, as the reason names it
    keys: ClassVar[tuple[str, str]]  # the record's figures of the real and the twin row
    moments: ClassVar[bool] = False  # whether its scores need the moments (Min-K%++)

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
        context, order_p, header_only = "the header", None, not p.context_rows
        if p.context_rows:
            table = ContrastTable(
                ctx.dataset.rows, ctx.dataset.delimiter, len(ctx.dataset.feature_names)
            )
            order = file_order(ctx.dataset, table, p.order_permutations, p.alpha, ctx.seed)
            order_p = order.p_value
            if order.shows_order:
                header_only = True
                context = (
                    f"the header alone: the file is in order ("
                    f"{', '.join(order.ordered_columns) or 'all columns together'}; "
                    f"p={order.p_value:.3g}), so the rows before a real row would tell a model "
                    "without memory what comes next, which no twin row gets"
                )
            elif p.window_tokens > 0:
                context = (
                    f"the header and the real rows before the row in a pass over the file "
                    f"(at least {p.context_rows}, and back to the pass's start; passes of at "
                    f"most {p.window_tokens} tokens)"
                )
            else:
                context = f"the header and the {p.context_rows} real rows before the row"
        pairs = twin_pairs(ctx.dataset, twin, p.n_rows, rng_of(ctx.seed))
        if len(pairs) < p.min_pairs:
            return TestResult.not_applicable(
                self.name, f"the file has {len(pairs)} rows; the test needs {p.min_pairs} pairs"
            )
        record = twin.spec.extra["twin"]
        chances = pair_chances(
            ctx.dataset, [(q.row, q.real, q.twin) for q in pairs], self.field_statistic(p)
        )
        rows = rows_sentence(len(pairs), len(ctx.dataset.rows), p.n_rows)
        facts = TwinFacts(
            str(record["sha256"]), int(record["rows"]), context, order_p, chances, header_only, rows
        )
        return pairs, facts

    def field_statistic(self, params: Any) -> FieldStatistic | None:
        """The test's score of a row from per-field log-probabilities, for the blind check's
        nearest-neighbour and boosted rules (``tabmem.stats.blind_check``); None where the
        test has none of its own beyond the row's likelihood."""
        return None

    def word(self, ctx: TestContext, queries: Sequence[TwinPair], facts: F) -> Worded[TwinPair]:
        """One read of the file for all pairs; each pair's request is its row in it."""
        read = pair_reads(ctx, queries, facts)
        rows = [pair.row - 1 for pair in queries]
        figures = read_figures(read, rows, ctx.params.window_tokens)
        return Worded(list(queries), [RowRead(read, row) for row in rows], figures)

    def ask(self, ctx: TestContext, requests: Sequence[Any]) -> list[Any]:
        """Each pair's two scores (with moments where the test needs them), the file's passes
        scored once."""
        model = ctx.model_for("Asking")
        return scored_reads(
            model, requests, f"{self.title} on {ctx.dataset.name}", moments=self.moments
        )

    def shift(
        self,
        ctx: TestContext,
        facts: F,
        records: Sequence[QueryRecord],
        info: dict[str, Any],
        figures: dict[str, Any] | None = None,
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
            "rows": facts.rows,
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
                f"untied pairs ({shift.ties} tied) of {shift.n} ({facts.rows}), by "
                f"{shift.mean:+.3g} on average (sd {shift.sd:.3g}); {decision.reason}"
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
                "rows_in_file": float(len(ctx.dataset.rows)),
                **wording_figures(figures or {}),
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
