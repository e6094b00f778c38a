"""The row completion test: can the model write the row that follows a window of rows?

The prompt holds ``prefix_rows`` contiguous data rows from a seeded random place in the
file; the model is asked for the next row. The first row it writes is scored: exact match
(k of n, binomial test against a data-only baseline) and Levenshtein similarity, compared
with the similarity to random other rows of the file by a paired test where the file's
rows are in random order. Either statistic can give ``evidence``, so their p-values are
adjusted by Holm's method and the family of two keeps its false-positive rate at ``alpha``.
The window prompts are shared with the first token test.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import (
    Answer,
    F,
    Recorded,
    Rescorable,
    Worded,
    count_metrics,
    count_rule,
    register_lifecycle,
    wording_figures,
)
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.csvtext import split_records
from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams, Request, Response
from tabmem.llm.stopping import StopRule
from tabmem.prompts.fewshot import chat_messages, few_shot_datasets, fit_to_context
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.answers import first_csv_row, row_matches
from tabmem.stats.baselines import ExactRowBaseline, exact_row_baseline
from tabmem.stats.hits import HitCount, decide_hits, unreachable_reason
from tabmem.stats.independence import RowOrder, row_order_check
from tabmem.stats.pvalues import wilcoxon_greater
from tabmem.stats.scoring import levenshtein_similarity
from tabmem.stats.uniqueness import duplicate_row_fraction, text_columns
from tabmem.stats.verdicts import decide, strongest


@dataclass(frozen=True)
class RowCompletionSettings(TestSettings):
    """``conf/test/row_completion.yaml``; first token reads the same windows."""

    n_queries: int
    prefix_rows: int
    alpha: float
    weak_alpha: float
    min_hits: int
    min_similarity_gain: float
    random_rows: int
    order_permutations: int
    extra_tokens: int
    stop_after_first_row: bool
    few_shot: int
    few_shot_pool: list[str]
    system_prompt: str


@dataclass(frozen=True)
class Window:
    """The rows before data row ``target`` (0-based) as the prompt; that row as the answer."""

    target: int
    prefix: str
    expected: str


def window(dataset: Dataset, target: int, prefix_rows: int) -> Window:
    """The window ending before data row ``target`` (0-based), rows as written in the file."""
    rows = dataset.rows
    shown = rows[target - prefix_rows : target]
    return Window(target, "".join(r + dataset.newline for r in shown), rows[target])


def target_positions(n_rows: int, prefix_rows: int, n: int, seed: int) -> list[int]:
    """``n`` distinct target rows at seeded random places; the first ``n`` of one shuffle, so
    a larger ``n`` keeps the smaller one's targets (and their cached answers)."""
    candidates = list(range(prefix_rows, n_rows))
    random.Random(seed).shuffle(candidates)
    return candidates[:n]


def window_positions(ctx: TestContext) -> list[int]:
    """The target rows of this cell's window queries (shared by row completion and first token)."""
    prefix_rows = ctx.params.prefix_rows
    n = ctx.params.n_queries
    return target_positions(len(ctx.dataset.rows), prefix_rows, n, ctx.seed)


def word_windows(ctx: TestContext, windows: Sequence[Window]) -> Worded[Window]:
    """Requests for the windows; chat gets fixed few-shot windows from other datasets (the
    same for every query, so local models reuse their prompt cache)."""
    p = ctx.params
    prefix_rows = p.prefix_rows
    model = ctx.model_for("Wording")
    chat = model.prompt_form == "chat"
    rng = random.Random(ctx.seed + 1)
    examples = few_shot_datasets(ctx.dataset, p.few_shot_pool, p.few_shot, rng) if chat else []
    shots = [
        window(d, rng.randrange(prefix_rows, len(d.rows)), prefix_rows)
        for d in examples
        if len(d.rows) > prefix_rows
    ]
    worded: Worded[Window] = Worded([], [])
    dropped = skipped = 0
    first_row_rule = (
        StopRule.first_row(ctx.dataset.header, ctx.dataset.delimiter)
        if p.stop_after_first_row
        else None
    )
    for win in windows:
        params = GenerationParams(
            max_tokens=model.count_tokens(win.expected) + p.extra_tokens,
            temperature=0.0,
            seed=ctx.seed,
            stop_rule=first_row_rule,
        )

        def build(kept: int, win: Window = win, params: GenerationParams = params) -> Request:
            if not chat:
                return Request(params=params, prompt=win.prefix)
            pairs = [(s.prefix, s.expected) for s in shots[:kept]]
            messages = chat_messages(p.system_prompt, pairs, win.prefix)
            return Request(params=params, messages=messages)

        fitted = fit_to_context(build, len(shots), model.count_tokens, model.context_window, params)
        if fitted.request is None:
            skipped += 1
            continue
        dropped += fitted.dropped_examples
        worded.requests.append(fitted.request)
        worded.queries.append(win)
    worded.context = {
        "few_shot_datasets": [d.name for d in examples],
        "few_shot_examples": len(examples),
        "few_shot_examples_dropped": dropped,
        "windows_skipped": skipped,
    }
    return worded


def locate_window(dataset: Dataset, recorded: Recorded) -> Window | str:
    """The window a recorded prefix shows: its rows found one after another in the file (a
    header line first is ignored), the row after them its target. A recorded suffix must
    begin with that row."""
    shown = [r for r in split_records(recorded.prefix) if r.strip()]
    if shown and shown[0] == dataset.header:
        shown = shown[1:]
    if not shown:
        return "the prefix shows no data row"
    expected = next(iter(split_records(recorded.suffix)), "")
    rows = dataset.rows
    for start in _row_places(dataset).get(shown[0], []):
        target = start + len(shown)
        if target < len(rows) and rows[start:target] == shown:
            if expected and expected != rows[target]:
                continue
            return Window(target, "".join(r + dataset.newline for r in shown), rows[target])
    return "its rows, with a next row as recorded, do not occur in the file"


@lru_cache(maxsize=8)
def _row_places(dataset: Dataset) -> dict[str, list[int]]:
    """Where each row text occurs in the file (0-based data rows); built once per dataset, not
    once per located line."""
    places: dict[str, list[int]] = {}
    for i, row in enumerate(dataset.rows):
        places.setdefault(row, []).append(i)
    return places


class WindowTest(Rescorable[Window, F]):
    """The tests asked with windows of rows: row completion and first token share the
    windows, their wording and how a recorded window is found in the file."""

    nothing_fits = "no window fits the model's context window with its answer"

    def pick(self, ctx: TestContext) -> list[Window]:
        prefix_rows = ctx.params.prefix_rows
        return [window(ctx.dataset, t, prefix_rows) for t in window_positions(ctx)]

    def word(self, ctx: TestContext, queries: Sequence[Window], facts: F) -> Worded[Window]:
        return word_windows(ctx, queries)

    def locate(self, ctx: TestContext, recorded: Recorded) -> Window | str:
        return locate_window(ctx.dataset, recorded)


def too_short_reason(dataset: Dataset, params: RowCompletionSettings) -> str:
    """Why the file is too short for window queries, or "" when it is long enough."""
    prefix_rows = params.prefix_rows
    if len(dataset.rows) <= prefix_rows:
        return (
            f"the file has {len(dataset.rows)} data rows, too few for a window of "
            f"{prefix_rows} rows and a row after it"
        )
    return ""


def row_order(ctx: TestContext) -> RowOrder:
    """The data-only check of row order, at the configured level and number of shuffles."""
    permutations = ctx.params.order_permutations
    alpha = ctx.params.alpha
    if 1 / (permutations + 1) >= alpha:
        raise ConfigError(
            f"order_permutations={permutations} cannot give a p-value below alpha={alpha:g}; "
            f"use at least {int(1 / alpha)} shuffles (199 for alpha=0.01)."
        )
    return row_order_check(ctx.dataset.frame, permutations=permutations, seed=ctx.seed, alpha=alpha)


def other_rows(drawn: Sequence[int], target: int) -> list[int]:
    """Rows drawn from the file's other rows: a draw from ``range(n_rows - 1)`` skips past
    the target row, so the target is never among them."""
    return [i if i < target else i + 1 for i in drawn]


@dataclass
class RowScore:
    """How the first row of one completion compares with the true row and with other rows."""

    answer: str
    exact: bool
    similarity: float
    random_similarity: float


def score_row(dataset: Dataset, win: Window, response: Response, others: list[int]) -> RowScore:
    """Exact match and similarities of the first row the completion writes."""
    answer = (
        "" if response.error else first_csv_row(response.text, dataset.header, dataset.delimiter)
    )
    rows = dataset.rows
    random_sims = [levenshtein_similarity(answer, rows[i]) for i in others]
    return RowScore(
        answer=answer,
        exact=bool(answer) and row_matches(answer, win.expected),
        similarity=levenshtein_similarity(answer, win.expected),
        random_similarity=sum(random_sims) / len(random_sims) if random_sims else 0.0,
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: rejecting each hypothesis whose
    adjusted p-value is below ``alpha`` keeps the family-wise error rate at ``alpha``."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _similarity_figures(records: Sequence[QueryRecord], order: RowOrder) -> dict[str, float]:
    """Mean similarities and their gain; the paired test's raw p-value where rows are in
    random order (the test is skipped on ordered files)."""
    similarity = [float(r.extra["similarity"]) for r in records]
    random_similarity = [float(r.extra["random_similarity"]) for r in records]
    gains = [a - b for a, b in zip(similarity, random_similarity, strict=True)]
    figures = {
        "mean_similarity": sum(similarity) / len(records),
        "mean_random_similarity": sum(random_similarity) / len(records),
        "similarity_gain": sum(gains) / len(gains),
    }
    if not order.ordered:
        figures["similarity_p_value"] = wilcoxon_greater(gains)
    return figures


@dataclass(frozen=True)
class RowFacts:
    """What row completion's decision needs besides the answers: the exact-match baseline,
    the file's row order, and the random other rows each query's answer is compared with."""

    baseline: ExactRowBaseline
    order: RowOrder
    others: list[list[int]]  # draw i for the i-th answered window (see other_rows)


@register_lifecycle
class RowCompletion(WindowTest[RowFacts]):
    """Ask for the row after each window; score exact matches and similarities; decide."""

    name = "row_completion"
    claims = "rows_seen"
    title = "row completion"
    settings = RowCompletionSettings

    def prepare(self, ctx: TestContext, queries: Sequence[Window]) -> RowFacts | TestResult:
        p = ctx.params
        short = too_short_reason(ctx.dataset, p)
        if short:
            return TestResult.not_applicable(self.name, short)
        columns = list(text_columns(ctx.dataset).values())
        baseline = exact_row_baseline(ctx.dataset.rows, columns, seed=ctx.seed)
        order = row_order(ctx)
        no_power = unreachable_reason(len(queries), baseline.rate, count_rule(p), "the next row")
        if no_power and order.ordered:
            info = {"rows_ordered": True}
            return TestResult.not_applicable(self.name, no_power, info=info)
        rng = random.Random(ctx.seed + 2)
        pool, k = len(ctx.dataset.rows) - 1, p.random_rows
        others = [rng.sample(range(pool), min(k, pool)) for _ in queries]
        return RowFacts(baseline, order, others)

    def score(self, ctx: TestContext, facts: RowFacts, answer: Answer[Window]) -> QueryRecord:
        win, response = answer.query, answer.response
        scored = score_row(
            ctx.dataset, win, response, other_rows(facts.others[answer.index], win.target)
        )
        return QueryRecord(
            prompt=answer.prompt,
            expected=win.expected,
            completion=response.text,
            score=float(scored.exact),
            error=response.error,
            extra={
                "target_row": win.target + 1,
                "prefix": win.prefix,
                "answer_row": scored.answer,
                "similarity": scored.similarity,
                "random_similarity": scored.random_similarity,
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: RowFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        """Exact-match test, similarity test where the rows are in random order, Holm."""
        p = ctx.params
        baseline, order = facts.baseline, facts.order
        n = len(records)
        hits = int(sum(r.score for r in records))
        rate = hits / n
        count = HitCount(hits, n, baseline.rate)
        exact_p = count.p_value
        sim_figures = _similarity_figures(records, order)
        similarity = "similarity_p_value" in sim_figures
        raw = [exact_p, sim_figures["similarity_p_value"]] if similarity else [exact_p]
        adjusted = holm(raw)
        decisions = [decide_hits("exact next rows", count, count_rule(p), adjusted[0])]
        if similarity:
            sim_figures["similarity_p_value_holm"] = adjusted[1]
            decisions.append(
                decide(
                    "Levenshtein similarity to the true row over random rows",
                    adjusted[1],
                    sim_figures["similarity_gain"],
                    p.alpha,
                    p.min_similarity_gain,
                )
            )
        decision = strongest(decisions)
        return TestResult(
            test=self.name,
            verdict=decision.verdict,
            reason=decision.reason,
            n_queries=n,
            n_hits=hits,
            rate=rate,
            baseline=baseline.rate,
            p_value=adjusted[0],
            metrics={
                **count_metrics(count),
                "exact_p_value": exact_p,
                "exact_p_value_holm": adjusted[0],
                "baseline_mode_row": baseline.mode_row,
                "baseline_repeat_previous": baseline.repeat_previous,
                "baseline_marginal_product": baseline.marginal_product,
                **sim_figures,
                **order.metrics(),
                "duplicate_row_fraction": duplicate_row_fraction(ctx.dataset.rows),
                **wording_figures(context),
            },
            info={
                "evidence_rule": _RULE,
                "similarity_test": (
                    "Wilcoxon signed-rank, one-sided, paired per query; p-values Holm-adjusted "
                    "over the two statistics"
                    if similarity
                    else "skipped: the file's rows are not in random order"
                ),
                "ordered_columns": order.ordered_columns,
                "few_shot_datasets": context.get("few_shot_datasets", []),
                "prompt_form": ctx.prompt_form,
            },
            records=list(records),
            tables={"row_order.json": order.columns},
        )


_RULE = (
    "evidence when exact next rows beat the best data-only guess (mode row, previous row, "
    "marginal draws) with p < alpha from at least min_hits hits, or (rows in random order "
    "only) the mean similarity to the true row beats the similarity to random rows with "
    "p < alpha by at least min_similarity_gain; where both "
    "statistics are tested, their p-values are Holm-adjusted (family-wise rate alpha)"
)
