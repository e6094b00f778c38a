"""The first token test: does the model know how the next row begins better than the data can tell?

It asks row completion's questions (the same windows, wording and answer budget, so a suite
pays for them once) and scores only the first token of the first row the model writes, as
the model's tokenizer splits it (API models: the text rule of ``tabmem.stats.tokens``). Three
predictors are fitted on the file alone (most frequent token, logistic regression,
gradient-boosted trees, all seeing the previous rows), cross-fitted so that every scored row is
predicted by models that never learnt it, as the papers compared with the best of those three.
Each query's baseline is the best that any of them, or a draw from the other rows' first
tokens, reaches on it; their mean over the queries, with the best predictor's accuracy over all
scored rows as a floor (``tabmem.stats.best_of``), is what a model without the rows reaches at
its best, and the model's hits are tested against it (``tabmem.stats.hits``); McNemar's paired
test against the best predictor on the same queries is reported beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import (
    Answer,
    against_best_predictor,
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
from tabmem.errors import ConfigError
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.answers import first_csv_row
from tabmem.stats.best_of import BestOf
from tabmem.stats.hits import unreachable_reason
from tabmem.stats.independence import RowOrder
from tabmem.stats.predictors import FirstTokenBaseline, first_token_baseline
from tabmem.stats.pvalues import binomial_greater, mcnemar_greater
from tabmem.stats.tokens import first_token
from tabmem.stats.uniqueness import is_row_id, text_columns


@dataclass(frozen=True)
class FirstTokenSettings(WindowSettings):
    """``conf/test/first_token.yaml``: the shared windows and the baselines' settings."""

    context_rows: int
    baseline_rows: int
    baseline_folds: int
    baseline_min_rows: int
    baseline_classes: int
    api_token_digits: int


TEST = "first_token"


def token_reader(ctx: TestContext) -> Callable[[str], str]:
    """The first token of a text, by the model's tokenizer or the documented rule."""
    digits = ctx.params.api_token_digits
    return lambda text: first_token(text, ctx.tokenize, digits)


def _context_rows(ctx: TestContext) -> int:
    """Previous rows the baselines see; never more than the window shows the model."""
    context_rows = ctx.params.context_rows
    prefix_rows = ctx.params.prefix_rows
    if not 1 <= context_rows <= prefix_rows:
        raise ConfigError(
            f"context_rows={context_rows} must be between 1 and prefix_rows={prefix_rows}: the "
            "baselines see at most the rows the model sees."
        )
    return context_rows


def _data_reason(ctx: TestContext) -> str:
    """Why the file itself rules the test out (too short, too few rows to score the baseline,
    a row id first), or ""."""
    short = too_short_reason(ctx.dataset, ctx.params)
    if short:
        return short
    scored = min(len(ctx.dataset.rows) - _context_rows(ctx), ctx.params.baseline_rows)
    minimum = ctx.params.baseline_min_rows
    if scored < minimum:
        return (
            f"only {max(scored, 0)} rows have {_context_rows(ctx)} rows before them to fit and "
            f"score the data-only baseline on, fewer than baseline_min_rows={minimum}"
        )
    first_name, first_values = next(iter(text_columns(ctx.dataset).items()))
    if is_row_id(first_values):
        return f"the first field, {first_name}, is a row id: its first token follows from the order"
    return ""


def _token_reason(
    ctx: TestContext, baseline: FirstTokenBaseline, positions: list[int], tokens: set[str]
) -> str:
    """Why the first tokens leave the test no power (constant, or too well predicted on the
    queried rows), or ""."""
    if len(tokens) <= 1:
        return f"the first token is always {next(iter(tokens), '')!r}"
    rate = BestOf.of([baseline.chances(i) for i in positions], floor=baseline.rate).rate
    return unreachable_reason(len(positions), rate, count_rule(ctx.params), "the first token")


@dataclass(frozen=True)
class TokenFacts:
    """What the first token decision needs: the cross-fitted baselines, the row order, and
    the reader of first tokens."""

    baseline: FirstTokenBaseline
    order: RowOrder
    read: Callable[[str], str]


@register_lifecycle
class FirstToken(WindowTest[TokenFacts]):
    """Fit the baselines, check the test can say something, ask, score first tokens, decide."""

    name = TEST
    table_order = 4
    claims = "rows_seen"
    title = "first token"
    settings = FirstTokenSettings

    def prepare(self, ctx: TestContext, queries: Sequence[Window]) -> TokenFacts | TestResult:
        p = ctx.params
        reason = _data_reason(ctx)
        if reason:
            return TestResult.not_applicable(TEST, reason)
        order = row_order(ctx)
        read = token_reader(ctx)
        rows = ctx.dataset.rows

        @cache
        def row_token(i: int) -> str:
            return read(rows[i])

        positions = [w.target for w in queries]
        baseline = first_token_baseline(
            row_token,
            ctx.dataset.frame,
            positions,
            context_rows=_context_rows(ctx),
            max_rows=p.baseline_rows,
            classes=p.baseline_classes,
            folds=p.baseline_folds,
            seed=ctx.seed,
        )
        seen = {row_token(i) for i in range(min(len(rows), 2000))}
        reason = _token_reason(ctx, baseline, positions, seen)
        if reason:
            info = {"baseline_accuracy": baseline.best.accuracy}
            return TestResult.not_applicable(TEST, reason, info=info)
        return TokenFacts(baseline, order, read)

    def score(self, ctx: TestContext, facts: TokenFacts, answer: Answer[Window]) -> QueryRecord:
        win, response, baseline = answer.query, answer.response, facts.baseline
        row = (
            ""
            if response.error
            else first_csv_row(response.text, ctx.dataset.header, ctx.dataset.delimiter)
        )
        truth, said = facts.read(win.expected), facts.read(row) if row else ""
        return QueryRecord(
            prompt=answer.prompt,
            expected=win.expected,
            completion=response.text,
            score=float(bool(said) and said == truth),
            error=response.error,
            extra={
                "target_row": win.target + 1,
                "prefix": win.prefix,
                "answer_row": row,
                "expected_token": truth,
                "answer_token": said,
                "baseline_token": baseline.best.predictions[win.target] or "",
                "baseline_right": baseline.right(win.target),
                "baseline_chances": baseline.chances(win.target),
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: TokenFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        """The answers' first tokens against the best data-only predictor; the context."""
        baseline, best = facts.baseline, facts.baseline.best
        per_query = BestOf.of([r.extra["baseline_chances"] for r in records], floor=baseline.rate)
        model_only = sum(r.score == 1 and not r.extra["baseline_right"] for r in records)
        baseline_only = sum(r.score == 0 and r.extra["baseline_right"] for r in records)
        n = len(records)
        hits = int(sum(r.score for r in records))
        return against_best_predictor(
            ctx,
            TEST,
            f"first tokens over the data-only baseline ({per_query.sentence()})",
            records,
            per_query.rate,
            metrics={
                **{f"baseline_{r.name}": r.accuracy for r in baseline.predictors},
                "baseline_cross_fitted": best.accuracy,
                "baseline_chance": baseline.chance,
                "baseline_on_queries": (hits - model_only + baseline_only) / n,
                "binomial_p_value_cross_fitted": binomial_greater(hits, n, best.accuracy),
                "mcnemar_p_value": mcnemar_greater(model_only, baseline_only),
                "baseline_scored_positions": len(baseline.positions),
                "baseline_folds": baseline.folds,
                **facts.order.metrics(),
                **wording_figures(context),
            },
            info={
                "evidence_rule": (
                    "evidence when first tokens beat the baseline — the best cross-fitted "
                    "data-only predictor's mean chance over the queries (mode, logistic "
                    "regression, gradient-boosted trees, a draw of the other rows' first "
                    "tokens), its accuracy over all scored rows as a floor "
                    "— with an exact binomial p < alpha from at least min_hits hits"
                ),
                "best_baseline": best.name,
                "baseline_set_by": per_query.leader(),
                "tokenizer": "model" if ctx.tokenize("a") is not None else "text rule",
                "ordered_columns": facts.order.ordered_columns,
                "few_shot_datasets": context.get("few_shot_datasets", []),
                "prompt_form": ctx.prompt_form,
            },
            tables={
                "first_token_baselines.json": baseline.table(),
                "row_order.json": facts.order.columns,
            },
        )
