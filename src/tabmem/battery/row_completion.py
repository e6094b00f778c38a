"""The row completion test: can the model write the row that follows a window of rows?

The prompt holds ``prefix_rows`` contiguous data rows from a seeded random place in the
file; the model is asked for the next row. The first row it writes is scored: exact match
(k of n, binomial test against a data-only baseline) and Levenshtein similarity, compared
with the similarity to random other rows of the file by a paired test where the file's
rows are in random order. Either statistic can give ``evidence``, so their p-values are
adjusted by Holm's method and the family of two keeps its false-positive rate at ``alpha``.
The windows and their wording are shared with the first token test (``battery/windows.py``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import (
    Answer,
    count_metrics,
    count_rule,
    register_lifecycle,
    wording_figures,
)
from tabmem.battery.windows import (
    Window,
    WindowSettings,
    WindowTest,
    row_order,
    too_short_reason,
)
from tabmem.data import Dataset
from tabmem.llm.base import Response
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.answers import first_csv_row, row_matches
from tabmem.stats.baselines import ExactRowBaseline, file_row_baseline
from tabmem.stats.hits import HitCount, decide_hits, unreachable_reason
from tabmem.stats.independence import RowOrder
from tabmem.stats.pvalues import wilcoxon_greater
from tabmem.stats.scoring import levenshtein_similarity
from tabmem.stats.uniqueness import duplicate_row_fraction
from tabmem.stats.verdicts import decide, strongest


@dataclass(frozen=True)
class RowCompletionSettings(WindowSettings):
    """``conf/test/row_completion.yaml``: the shared windows and the similarity statistic."""

    min_similarity_gain: float
    random_rows: int


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
    table_order = 2
    claims = "rows_seen"
    title = "row completion"
    settings = RowCompletionSettings

    def prepare(self, ctx: TestContext, queries: Sequence[Window]) -> RowFacts | TestResult:
        p = ctx.params
        short = too_short_reason(ctx.dataset, p)
        if short:
            return TestResult.not_applicable(self.name, short)
        baseline = file_row_baseline(ctx.dataset, ctx.seed)
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
