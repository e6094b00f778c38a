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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.battery.base import TestContext, register
from tabmem.data import Dataset
from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams, Request, Response
from tabmem.llm.stopping import StopRule
from tabmem.prompts.fewshot import chat_messages, few_shot_datasets, fit_to_context
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.answers import first_csv_row, row_matches
from tabmem.stats.baselines import ExactRowBaseline, exact_row_baseline
from tabmem.stats.independence import RowOrder, row_order_check
from tabmem.stats.pvalues import binomial_greater, clopper_pearson, wilcoxon_greater
from tabmem.stats.scoring import levenshtein_similarity
from tabmem.stats.uniqueness import duplicate_row_fraction, text_columns
from tabmem.stats.verdicts import decide, no_power_reason, strongest


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


@dataclass
class WindowQueries:
    """The requests of a window test, the windows they ask about, and what was left out."""

    requests: list[Request]
    windows: list[Window]
    few_shot_datasets: list[str]
    examples_dropped: int
    windows_skipped: int


def window_queries(ctx: TestContext, positions: list[int]) -> WindowQueries:
    """Requests for the windows ending before ``positions``; chat gets fixed few-shot windows
    from other datasets (the same for every query, so local models reuse their prompt cache)."""
    p = ctx.params
    prefix_rows = int(p.get("prefix_rows", 10))
    chat = ctx.model.prompt_form == "chat"
    rng = random.Random(ctx.seed + 1)
    examples = (
        few_shot_datasets(ctx.dataset, p.get("few_shot_pool", []), int(p.get("few_shot", 3)), rng)
        if chat
        else []
    )
    shots = [
        window(d, rng.randrange(prefix_rows, len(d.rows)), prefix_rows)
        for d in examples
        if len(d.rows) > prefix_rows
    ]
    queries = WindowQueries([], [], [d.name for d in examples], 0, 0)
    first_row_rule = (
        StopRule.first_row(ctx.dataset.header, ctx.dataset.delimiter)
        if p.get("stop_after_first_row", True)
        else None
    )
    for target in positions:
        win = window(ctx.dataset, target, prefix_rows)
        params = GenerationParams(
            max_tokens=ctx.model.count_tokens(win.expected) + int(p.get("extra_tokens", 32)),
            temperature=0.0,
            seed=ctx.seed,
            stop_rule=first_row_rule,
        )

        def build(kept: int, win: Window = win, params: GenerationParams = params) -> Request:
            if not chat:
                return Request(params=params, prompt=win.prefix)
            pairs = [(s.prefix, s.expected) for s in shots[:kept]]
            messages = chat_messages(str(p.get("system_prompt", "")), pairs, win.prefix)
            return Request(params=params, messages=messages)

        fitted = fit_to_context(
            build, len(shots), ctx.model.count_tokens, ctx.model.context_window, params
        )
        if fitted.request is None:
            queries.windows_skipped += 1
            continue
        queries.examples_dropped += fitted.dropped_examples
        queries.requests.append(fitted.request)
        queries.windows.append(win)
    return queries


def window_positions(ctx: TestContext) -> list[int]:
    """The target rows of this cell's window queries (shared by row completion and first token)."""
    prefix_rows = int(ctx.params.get("prefix_rows", 10))
    n = int(ctx.params.get("n_queries", 25))
    return target_positions(len(ctx.dataset.rows), prefix_rows, n, ctx.seed)


def too_short_reason(dataset: Dataset, params: Mapping[str, Any]) -> str:
    """Why the file is too short for window queries, or "" when it is long enough."""
    prefix_rows = int(params.get("prefix_rows", 10))
    if len(dataset.rows) <= prefix_rows:
        return (
            f"the file has {len(dataset.rows)} data rows, too few for a window of "
            f"{prefix_rows} rows and a row after it"
        )
    return ""


def ask(ctx: TestContext, queries: WindowQueries, test: str) -> list[Response]:
    """Put a window test's requests to the model (cached, concurrent, never raising)."""
    return ctx.model.run(queries.requests, description=f"{test} test on {ctx.dataset.name}")


def row_order(ctx: TestContext) -> RowOrder:
    """The data-only check of row order, at the configured level and number of shuffles."""
    permutations = int(ctx.params.get("order_permutations", 199))
    alpha = float(ctx.params.get("alpha", 0.01))
    if 1 / (permutations + 1) >= alpha:
        raise ConfigError(
            f"order_permutations={permutations} cannot give a p-value below alpha={alpha:g}; "
            f"use at least {int(1 / alpha)} shuffles (199 for alpha=0.01)."
        )
    return row_order_check(ctx.dataset.frame, permutations=permutations, seed=ctx.seed, alpha=alpha)


def other_rows(n_rows: int, target: int, k: int, rng: random.Random) -> list[int]:
    """``k`` rows drawn at random from the file, the target row excluded."""
    pool = n_rows - 1
    return [i if i < target else i + 1 for i in rng.sample(range(pool), min(k, pool))]


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


def _similarity_figures(scores: list[RowScore], order: RowOrder) -> dict[str, float]:
    """Mean similarities and their gain; the paired test's raw p-value where rows are in
    random order (the test is skipped on ordered files)."""
    gains = [s.similarity - s.random_similarity for s in scores]
    figures = {
        "mean_similarity": sum(s.similarity for s in scores) / len(scores),
        "mean_random_similarity": sum(s.random_similarity for s in scores) / len(scores),
        "similarity_gain": sum(gains) / len(gains),
    }
    if not order.ordered:
        figures["similarity_p_value"] = wilcoxon_greater(gains)
    return figures


@register("row_completion")
def run_row_completion_test(ctx: TestContext) -> TestResult:
    """Ask for the row after each window; score exact matches and similarities; decide."""
    p = ctx.params
    alpha = float(p.get("alpha", 0.01))
    min_effect = float(p.get("min_effect", 0.1))
    short = too_short_reason(ctx.dataset, p)
    if short:
        return TestResult.not_applicable("row_completion", short)
    columns = list(text_columns(ctx.dataset).values())
    baseline = exact_row_baseline(ctx.dataset.rows, columns, seed=ctx.seed)
    order = row_order(ctx)
    positions = window_positions(ctx)
    no_power = no_power_reason("the next row", len(positions), baseline.rate, alpha, min_effect)
    if no_power and order.ordered:
        return TestResult.not_applicable("row_completion", no_power, info={"rows_ordered": True})
    queries = window_queries(ctx, positions)
    if not queries.requests:
        return TestResult.not_applicable(
            "row_completion", "no window fits the model's context window with its answer"
        )
    responses = ask(ctx, queries, "row completion")
    rng = random.Random(ctx.seed + 2)
    n_random = int(p.get("random_rows", 10))
    scores = [
        score_row(
            ctx.dataset, win, response, other_rows(len(ctx.dataset.rows), win.target, n_random, rng)
        )
        for win, response in zip(queries.windows, responses, strict=True)
    ]
    return _result(ctx, queries, responses, scores, baseline, order, alpha, min_effect)


def _result(
    ctx: TestContext,
    queries: WindowQueries,
    responses: list[Response],
    scores: list[RowScore],
    baseline: ExactRowBaseline,
    order: RowOrder,
    alpha: float,
    min_effect: float,
) -> TestResult:
    """The result object: exact-match test, similarity test where it applies, context."""
    n = len(scores)
    hits = sum(s.exact for s in scores)
    rate = hits / n
    exact_p = binomial_greater(hits, n, baseline.rate)
    sim_figures = _similarity_figures(scores, order)
    similarity = "similarity_p_value" in sim_figures
    raw = [exact_p, sim_figures["similarity_p_value"]] if similarity else [exact_p]
    adjusted = holm(raw)
    decisions = [decide("exact next rows", adjusted[0], rate - baseline.rate, alpha, min_effect)]
    if similarity:
        sim_figures["similarity_p_value_holm"] = adjusted[1]
        decisions.append(
            decide(
                "Levenshtein similarity to the true row over random rows",
                adjusted[1],
                sim_figures["similarity_gain"],
                alpha,
                float(ctx.params.get("min_similarity_gain", 0.1)),
            )
        )
    decision = strongest(decisions)
    low, high = clopper_pearson(hits, n)
    return TestResult(
        test="row_completion",
        verdict=decision.verdict,
        reason=decision.reason,
        n_queries=n,
        n_hits=hits,
        rate=rate,
        baseline=baseline.rate,
        p_value=adjusted[0],
        metrics={
            "rate_ci_low": low,
            "rate_ci_high": high,
            "exact_p_value": exact_p,
            "exact_p_value_holm": adjusted[0],
            "baseline_mode_row": baseline.mode_row,
            "baseline_repeat_previous": baseline.repeat_previous,
            "baseline_marginal_product": baseline.marginal_product,
            **sim_figures,
            **order.metrics(),
            "duplicate_row_fraction": duplicate_row_fraction(ctx.dataset.rows),
            "few_shot_examples": len(queries.few_shot_datasets),
            "few_shot_examples_dropped": queries.examples_dropped,
            "windows_skipped": queries.windows_skipped,
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
            "few_shot_datasets": queries.few_shot_datasets,
            "prompt_form": ctx.model.prompt_form,
        },
        records=[
            _record(request, win, response, score)
            for request, win, response, score in zip(
                queries.requests, queries.windows, responses, scores, strict=True
            )
        ],
        tables={"row_order.json": order.columns},
    )


_RULE = (
    "evidence when exact next rows beat the data-only baseline with p < alpha by at least "
    "min_effect, or (rows in random order only) the mean similarity to the true row beats "
    "the similarity to random rows with p < alpha by at least min_similarity_gain; where both "
    "statistics are tested, their p-values are Holm-adjusted (family-wise rate alpha)"
)


def _record(request: Request, win: Window, response: Response, score: RowScore) -> QueryRecord:
    """One window query as the query table shows it."""
    return QueryRecord(
        prompt=request.as_text(),
        expected=win.expected,
        completion=response.text,
        score=float(score.exact),
        error=response.error,
        extra={
            "target_row": win.target + 1,
            "prefix": win.prefix,
            "answer_row": score.answer,
            "similarity": score.similarity,
            "random_similarity": score.random_similarity,
        },
    )
