"""The first token test: does the model know how the next row begins better than the data can tell?

It asks row completion's questions (the same windows, wording and answer budget, so a suite
pays for them once) and scores only the first token of the first row the model writes, as
the model's tokenizer splits it (API models: the text rule of ``tabmem.stats.tokens``). The
baseline is the best of three predictors fitted on the file alone (most frequent token,
logistic regression, gradient-boosted trees, all seeing the previous rows).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from tabmem.llm.base import Response
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.answers import first_csv_row
from tabmem.stats.independence import RowOrder
from tabmem.stats.predictors import FirstTokenBaseline, first_token_baseline
from tabmem.stats.pvalues import binomial_greater, clopper_pearson, mcnemar_greater
from tabmem.stats.tokens import first_token
from tabmem.stats.uniqueness import is_row_id, text_columns
from tabmem.stats.verdicts import decide, no_power_reason
from tabmem.tests.base import TestContext, register
from tabmem.tests.row_completion import (
    WindowQueries,
    ask,
    not_applicable,
    row_order,
    too_short_reason,
    window_positions,
    window_queries,
)

TEST = "first_token"


def token_reader(ctx: TestContext) -> Callable[[str], str]:
    """The first token of a text, by the model's tokenizer or the documented rule."""
    digits = int(ctx.params.get("api_token_digits", 3))
    return lambda text: first_token(text, ctx.model.tokenize, digits)


def _data_reason(ctx: TestContext) -> str:
    """Why the file itself rules the test out (too short, a row id first), or ""."""
    short = too_short_reason(ctx.dataset, ctx.params)
    if short:
        return short
    first_name, first_values = next(iter(text_columns(ctx.dataset).items()))
    if is_row_id(first_values):
        return f"the first field, {first_name}, is a row id: its first token follows from the order"
    return ""


def _token_reason(ctx: TestContext, baseline: FirstTokenBaseline, tokens: set[str]) -> str:
    """Why the first tokens leave the test no power (constant, or too well predicted), or ""."""
    if len(tokens) <= 1:
        return f"the first token is always {next(iter(tokens), '')!r}"
    p = ctx.params
    return no_power_reason(
        "the first token",
        len(window_positions(ctx)),
        baseline.best.accuracy,
        float(p.get("alpha", 0.01)),
        float(p.get("min_effect", 0.1)),
    )


@register(TEST)
def run_first_token_test(ctx: TestContext) -> TestResult:
    """Fit the baselines, check the test can say something, ask, score first tokens, decide."""
    p = ctx.params
    reason = _data_reason(ctx)
    if reason:
        return not_applicable(TEST, reason)
    order = row_order(ctx)
    read = token_reader(ctx)
    rows = ctx.dataset.rows

    @cache
    def row_token(i: int) -> str:
        return read(rows[i])

    positions = window_positions(ctx)
    baseline = first_token_baseline(
        row_token,
        ctx.dataset.frame,
        positions,
        context_rows=int(p.get("context_rows", 3)),
        max_rows=int(p.get("baseline_rows", 2000)),
        classes=int(p.get("baseline_classes", 20)),
        holdout_fraction=float(p.get("holdout_fraction", 0.25)),
        seed=ctx.seed,
    )
    seen = {row_token(i) for i in range(min(len(rows), 2000))}
    reason = _token_reason(ctx, baseline, seen)
    if reason:
        return not_applicable(TEST, reason, baseline_accuracy=baseline.best.accuracy)
    queries = window_queries(ctx, positions)
    if not queries.requests:
        return not_applicable(TEST, "no window fits the model's context window with its answer")
    responses = ask(ctx, queries, "first token")
    return _result(ctx, queries, responses, baseline, order, read)


def _result(
    ctx: TestContext,
    queries: WindowQueries,
    responses: list[Response],
    baseline: FirstTokenBaseline,
    order: RowOrder,
    read: Callable[[str], str],
) -> TestResult:
    """Score each answer's first token, test it against the best baseline, build the result."""
    p = ctx.params
    alpha = float(p.get("alpha", 0.01))
    best = baseline.best
    by_target = dict(zip(window_positions(ctx), best.predictions, strict=True))
    records: list[QueryRecord] = []
    model_only = baseline_only = 0
    for request, win, response in zip(queries.requests, queries.windows, responses, strict=True):
        answer = (
            ""
            if response.error
            else first_csv_row(response.text, ctx.dataset.header, ctx.dataset.delimiter)
        )
        truth, said = read(win.expected), read(answer) if answer else ""
        hit, base_hit = bool(said) and said == truth, by_target[win.target] == truth
        model_only += hit and not base_hit
        baseline_only += base_hit and not hit
        records.append(
            QueryRecord(
                prompt=request.as_text(),
                expected=win.expected,
                completion=response.text,
                score=float(hit),
                error=response.error,
                extra={
                    "target_row": win.target + 1,
                    "prefix": win.prefix,
                    "answer_row": answer,
                    "expected_token": truth,
                    "answer_token": said,
                    "baseline_token": by_target[win.target] or "",
                },
            )
        )
    n = len(records)
    hits = int(sum(r.score for r in records))
    p_value = binomial_greater(hits, n, best.accuracy)
    decision = decide(
        "first tokens", p_value, hits / n - best.accuracy, alpha, float(p.get("min_effect", 0.1))
    )
    low, high = clopper_pearson(hits, n)
    return TestResult(
        test=TEST,
        verdict=decision.verdict,
        reason=decision.reason,
        n_queries=n,
        n_hits=hits,
        rate=hits / n,
        baseline=best.accuracy,
        p_value=p_value,
        metrics={
            "rate_ci_low": low,
            "rate_ci_high": high,
            **{f"baseline_{r.name}": r.accuracy for r in baseline.predictors},
            "baseline_on_queries": (hits - model_only + baseline_only) / n,
            "mcnemar_p_value": mcnemar_greater(model_only, baseline_only),
            "baseline_train_positions": baseline.train_positions,
            "baseline_holdout_positions": baseline.holdout_positions,
            **order.metrics(),
            "few_shot_examples": len(queries.few_shot_datasets),
            "few_shot_examples_dropped": queries.examples_dropped,
            "windows_skipped": queries.windows_skipped,
        },
        info={
            "evidence_rule": (
                "evidence when first tokens beat the best data-only baseline's holdout accuracy "
                "with a binomial p < alpha by at least min_effect"
            ),
            "best_baseline": best.name,
            "tokenizer": "model" if ctx.model.tokenize("a") is not None else "text rule",
            "ordered_columns": order.ordered_columns,
            "few_shot_datasets": queries.few_shot_datasets,
            "prompt_form": ctx.model.prompt_form,
        },
        records=records,
        tables={"first_token_baselines.json": baseline.table(), "row_order.json": order.columns},
    )
