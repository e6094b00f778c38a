"""Conditional completion: given the first features of a real row, is the model's next value one
that some real row with those first values has — more often than a model of the data's
distribution, which has not read the row, could manage?

For each feature after the first, ``n_per_feature`` queries show the values of the features
before it in a random real row, as ``Name = value`` lines, and end with ``Feature =``. The answer
is *valid* when some real row starts with the shown values and has that value next. Each query's
baseline is the better of two answers that need no memory of the row: a draw from the feature's
marginal distribution (its chance of being valid is computed exactly from the data) and the
greedy answer of a nearest-neighbour model of the file fitted without the queried row
(``tabmem.stats.neighbours``) — valid or not, as a model answering at temperature 0 would be.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tabmem.battery.base import TestContext, register
from tabmem.battery.sample import metric_name
from tabmem.data import Dataset
from tabmem.llm.base import GenerationParams, Request
from tabmem.prompts.fewshot import chat_messages, fit_to_context
from tabmem.prompts.observations import (
    dataset_title,
    example_pool,
    feature_names,
    format_pairs,
    read_value,
    row_values,
)
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.neighbours import NeighbourModel
from tabmem.stats.paired import against_baseline, query_baselines
from tabmem.stats.prefixes import PrefixIndex, wilson
from tabmem.stats.samples import data_values
from tabmem.stats.verdicts import decide


@dataclass(frozen=True)
class Question:
    """The first ``position`` values of one real row, asking for feature ``position``."""

    row: int
    position: int
    text: str
    prefix: tuple[str, ...]
    truth: str


def _question_text(template: str, dataset: Dataset, values: list[str], position: int) -> str:
    names = feature_names(dataset)
    return template.format(
        dataset=dataset_title(dataset),
        pairs=format_pairs(names[:position], values[:position]),
        feature=names[position],
    )


def make_question(dataset: Dataset, template: str, rng: random.Random, position: int) -> Question:
    """A random real row cut before feature ``position`` (1-based count of shown features)."""
    row = rng.randrange(len(dataset.rows))
    values = row_values(dataset, row)
    text = _question_text(template, dataset, values, position)
    return Question(row, position, text, tuple(values[:position]), values[position])


def _example(dataset: Dataset, template: str, rng: random.Random, position: int) -> tuple[str, str]:
    """A few-shot example from another dataset, cut at a similar place, with its true value."""
    cut = min(max(1, position), len(feature_names(dataset)) - 1)
    question = make_question(dataset, template, rng, cut)
    return question.text, question.truth


def _positions(dataset: Dataset, wanted: Any) -> list[int]:
    """The features to ask for, as positions: every feature after the first by default."""
    names = feature_names(dataset)
    if not wanted:
        return list(range(1, len(names)))
    return [names.index(n) for n in wanted if n in names and names.index(n) > 0]


def _max_tokens(ctx: TestContext, position: int, columns: list[tuple[str, ...]]) -> int:
    """Room for the feature's longest value in the file, and for a repeated ``Feature =``."""
    longest = max(columns[position], key=len, default="")
    return ctx.model.count_tokens(longest) + 16


def _request(
    ctx: TestContext,
    p: Mapping[str, Any],
    pool: list[Dataset],
    question: Question,
    rng: random.Random,
    max_tokens: int,
) -> tuple[Request | None, int]:
    """The request for one question, with its own few-shot examples; None if it cannot fit."""
    template = str(p["completion_prompt"])
    shots = rng.sample(pool, min(int(p.get("few_shot", 3)), len(pool)))
    examples = [_example(d, template, rng, question.position) for d in shots]
    chat = ctx.model.prompt_form == "chat"
    params = GenerationParams(
        max_tokens=max_tokens, temperature=0.0, stop=() if chat else ("\n",), seed=ctx.seed
    )

    def build(kept: int) -> Request:
        if chat:
            system = str(p.get("system_prompt", ""))
            return Request(
                params=params, messages=chat_messages(system, examples[:kept], question.text)
            )
        text = "".join(f"{u} {a}\n\n" for u, a in examples[:kept]) + question.text
        return Request(params=params, prompt=text)

    fitted = fit_to_context(
        build, len(examples), ctx.model.count_tokens, ctx.model.context_window, params
    )
    return fitted.request, fitted.dropped_examples


def _requests(ctx: TestContext, p: Mapping[str, Any]) -> tuple[list[Request], list[Question], int]:
    """One request per (feature, repetition), each with its own row and few-shot examples."""
    template = str(p["completion_prompt"])
    pool = example_pool(ctx.dataset, list(p.get("few_shot_pool", [])))
    columns = list(zip(*data_values(ctx.dataset), strict=True))
    requests, questions, dropped = [], [], 0
    for position in _positions(ctx.dataset, p.get("features")):
        max_tokens = _max_tokens(ctx, position, columns)
        for i in range(int(p.get("n_per_feature", 10))):
            rng = random.Random(f"{ctx.seed}:{position}:{i}")
            question = make_question(ctx.dataset, template, rng, position)
            request, lost = _request(ctx, p, pool, question, rng, max_tokens)
            if request is not None:
                requests.append(request)
                questions.append(question)
                dropped += lost
    return requests, questions, dropped


@dataclass(frozen=True)
class FeatureRates:
    """One feature's valid-completion rate, its data-only baseline (the better of a marginal draw
    and the greedy answer, per query), the marginal draws' rate alone, and the exact p-value."""

    feature: str
    position: int
    n: int
    valid: int
    rate: float
    low: float
    high: float
    baseline: float
    baseline_low: float
    baseline_high: float
    marginal: float
    p_value: float


def feature_rates(names: list[str], records: list[QueryRecord]) -> list[FeatureRates]:
    """Per asked feature: the model's rate with a Wilson interval, the data-only baseline with a
    normal interval, and the exact p-value of as many valid answers against the per-query
    baselines (``tabmem.stats.paired``)."""
    out = []
    for position in sorted({r.extra["position"] for r in records}):
        mine = [r for r in records if r.extra["position"] == position]
        valid = sum(int(r.score) for r in mine)
        chances = np.array([r.extra["baseline"] for r in mine])
        spread = 1.96 * chances.std(ddof=1) / np.sqrt(len(mine)) if len(mine) > 1 else 0.0
        interval = wilson(valid, len(mine))
        out.append(
            FeatureRates(
                feature=names[position],
                position=position,
                n=len(mine),
                valid=valid,
                rate=interval.rate,
                low=interval.low,
                high=interval.high,
                baseline=float(chances.mean()),
                baseline_low=float(max(0.0, chances.mean() - spread)),
                baseline_high=float(min(1.0, chances.mean() + spread)),
                marginal=float(np.mean([r.extra["marginal_chance"] for r in mine])),
                p_value=against_baseline(
                    [r.score for r in mine], [r.extra["baseline"] for r in mine]
                ).p_value,
            )
        )
    return out


def rates_figure(rates: list[FeatureRates], title: str) -> Figure:
    """Valid-completion rate per feature with 95% intervals, beside the data-only baseline's."""
    figure = Figure(figsize=(max(6.0, 0.55 * len(rates) + 3), 4.5), layout="constrained")
    ax = figure.subplots()
    x = np.arange(len(rates))
    for offset, label, mid, low, high in [
        (-0.12, "model", [r.rate for r in rates], [r.low for r in rates], [r.high for r in rates]),
        (
            0.12,
            "data-only baseline",
            [r.baseline for r in rates],
            [r.baseline_low for r in rates],
            [r.baseline_high for r in rates],
        ),
    ]:
        mid_a = np.array(mid)
        errors = np.vstack([mid_a - np.array(low), np.array(high) - mid_a])
        ax.errorbar(x + offset, mid_a, yerr=errors, fmt="o", capsize=3, label=label)
    ax.set_xticks(x, [r.feature for r in rates], rotation=60, ha="right", fontsize=8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("valid completions (95% interval)")
    ax.set_xlabel("feature asked for (the features before it are shown)")
    figure.legend(loc="outside upper right", ncols=2)
    ax.set_title(title, loc="left")
    return figure


def _rates_table(rates: list[FeatureRates]) -> pd.DataFrame:
    return pd.DataFrame([r.__dict__ for r in rates])


@register("conditional_completion")
def run_conditional_completion_test(ctx: TestContext) -> TestResult:
    """Ask for the next feature of real row beginnings; compare validity, query by query, with
    what a model of the distribution that has not read the row could reach."""
    p = ctx.params
    names = feature_names(ctx.dataset)
    if len(names) < 2:
        return TestResult.not_applicable(
            "conditional_completion", "the dataset has fewer than two features"
        )
    requests, questions, dropped = _requests(ctx, p)
    responses = ctx.model.run(requests, description=f"conditional completion on {ctx.dataset.name}")
    rows = data_values(ctx.dataset)
    index, model = PrefixIndex(rows), NeighbourModel(rows)
    records = []
    for request, question, response in zip(requests, questions, responses, strict=True):
        answer = (
            "" if response.error else read_value(response.text, names[question.position], names)
        )
        valid = bool(answer) and index.is_valid(question.prefix, answer)
        greedy = model.greedy(
            question.position, dict(enumerate(question.prefix)), exclude=[question.row]
        )
        greedy_valid = bool(greedy) and index.is_valid(question.prefix, greedy)
        chance = index.marginal_chance(question.prefix)
        records.append(
            QueryRecord(
                prompt=request.as_text(),
                expected=question.truth,
                completion=response.text,
                score=float(valid),
                error=response.error,
                extra={
                    "feature": names[question.position],
                    "position": question.position,
                    "row": question.row + 1,
                    "answer": answer,
                    "marginal_chance": chance,
                    "greedy_answer": greedy,
                    "greedy_valid": greedy_valid,
                    "baseline": query_baselines([chance], [greedy_valid])[0],
                },
            )
        )
    rates = feature_rates(names, records)
    test = against_baseline([r.score for r in records], [r.extra["baseline"] for r in records])
    alpha, min_gain = float(p.get("alpha", 0.01)), float(p.get("min_gain", 0.1))
    decision = decide(
        "valid completions over the data-only baseline", test.p_value, test.effect, alpha, min_gain
    )
    reason = (
        f"{test.rate:.0%} of completions are valid against {test.baseline:.0%} for a model of "
        f"the data's distribution without the row; {decision.reason}"
    )
    title = f"{ctx.model.name} on {ctx.dataset.name}: conditional completion"
    return TestResult(
        test="conditional_completion",
        verdict=decision.verdict,
        reason=reason,
        n_queries=len(records),
        n_hits=sum(int(r.score) for r in records),
        rate=test.rate,
        baseline=test.baseline,
        p_value=test.p_value,
        metrics={
            "few_shot_examples_dropped": dropped,
            "features_asked": len(rates),
            "features_significant": sum(r.p_value < alpha for r in rates),
            "marginal_rate": float(np.mean([r.extra["marginal_chance"] for r in records]))
            if records
            else 0.0,
            "greedy_valid_rate": float(np.mean([r.extra["greedy_valid"] for r in records]))
            if records
            else 0.0,
            **{metric_name("valid_rate", r.feature): r.rate for r in rates},
            **{metric_name("baseline_rate", r.feature): r.baseline for r in rates},
            **{metric_name("marginal_rate", r.feature): r.marginal for r in rates},
        },
        info={
            "evidence_rule": (
                f"valid answers beyond the data-only baselines, exact p < {alpha} "
                "(Poisson-binomial over the per-query baselines), "
                f"and valid rate at least {min_gain} above the baseline; the baseline of a query "
                "is the better of a marginal draw and the greedy answer of a nearest-neighbour "
                "model of the file fitted without the queried row"
            ),
            "prompt_form": ctx.model.prompt_form,
        },
        records=records,
        tables={"feature_rates.json": _rates_table(rates)},
        figures={"conditional_completion.png": rates_figure(rates, title)},
    )
