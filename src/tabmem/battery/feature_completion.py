"""The feature completion test: given every other feature of a row, can the model name the
value of a highly unique one?

The prompt lists a random row's features as ``Feature = Value`` lines, leaving out one
feature with many distinct values (a name, a measurement with many decimals), and ends with
``Feature =``. Many distinct values do not make a feature unguessable: iris' petal length
follows from the species and the petal width. So each query's baseline is the better of a
guess from the feature's distribution (a draw, or its mode) and the greedy answer of a
nearest-neighbour model of the other features fitted without the queried row: an exact answer
beyond what such a model gets points to memory of the row. A feature that model predicts too
well leaves no room for memory to show, and the test does not apply.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from tabmem.battery.base import TestContext, register
from tabmem.data import Dataset
from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams, Request, Response
from tabmem.prompts.fewshot import chat_messages, few_shot_datasets, fit_to_context
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.answers import feature_answer, values_match
from tabmem.stats.baselines import MarginalMatch, marginal_match
from tabmem.stats.neighbours import NeighbourModel
from tabmem.stats.paired import against_baseline, query_baselines
from tabmem.stats.pvalues import binomial_greater, clopper_pearson
from tabmem.stats.uniqueness import (
    UniqueFeature,
    duplicate_row_fraction,
    most_unique_feature,
    text_columns,
    unique_fraction,
)
from tabmem.stats.verdicts import decide, no_power_reason

TEST = "feature_completion"


@dataclass(frozen=True)
class FeatureQuestion:
    """One row's other features as ``Feature = Value`` lines ending in ``feature =``."""

    row: int
    prompt: str
    answer: str


def question(columns: Mapping[str, list[str]], row: int, feature: str) -> FeatureQuestion:
    """The question for data row ``row`` (0-based): the other features in file order, then
    the asked one."""
    lines = [f"{name} = {values[row]}" for name, values in columns.items() if name != feature]
    return FeatureQuestion(row, "\n".join([*lines, f"{feature} ="]), columns[feature][row])


def choose_feature(columns: Mapping[str, list[str]], named: str | None) -> UniqueFeature | None:
    """The configured feature, or the most unique one; a name the file lacks is an error."""
    if not named:
        return most_unique_feature(dict(columns))
    if named not in columns:
        raise ConfigError(
            f"Dataset has no feature '{named}' for test.feature; choose one of: "
            f"{', '.join(columns)}."
        )
    return UniqueFeature(named, unique_fraction(columns[named]))


def _examples(ctx: TestContext, rng: random.Random) -> list[FeatureQuestion]:
    """One question from each few-shot dataset (other datasets only), about its own most
    unique feature; fixed for every query of the cell."""
    p = ctx.params
    found = few_shot_datasets(
        ctx.dataset, p.get("few_shot_pool", []), int(p.get("few_shot", 3)), rng
    )
    examples = []
    for dataset in found:
        columns = text_columns(dataset)
        feature = most_unique_feature(columns)
        if feature is not None and dataset.rows:
            examples.append(question(columns, rng.randrange(len(dataset.rows)), feature.name))
    return examples


@dataclass
class FeatureQueries:
    """The requests, the questions they ask, and how many examples or questions were cut."""

    requests: list[Request]
    questions: list[FeatureQuestion]
    examples: int
    examples_dropped: int
    skipped: int


def feature_queries(
    ctx: TestContext, columns: Mapping[str, list[str]], feature: str
) -> FeatureQueries:
    """Requests for ``n_queries`` seeded random rows; chat adds few-shot questions."""
    p = ctx.params
    chat = ctx.model.prompt_form == "chat"
    examples = _examples(ctx, random.Random(ctx.seed + 1)) if chat else []
    n_rows = len(ctx.dataset.rows)
    rows = random.Random(ctx.seed).sample(range(n_rows), min(int(p.get("n_queries", 25)), n_rows))
    queries = FeatureQueries([], [], len(examples), 0, 0)
    for row in rows:
        asked = question(columns, row, feature)
        params = GenerationParams(
            max_tokens=ctx.model.count_tokens(asked.answer) + int(p.get("extra_tokens", 16)),
            temperature=0.0,
            stop=() if chat else ("\n",),
            seed=ctx.seed,
        )

        def build(kept: int, asked=asked, params=params) -> Request:
            if not chat:
                return Request(params=params, prompt=asked.prompt)
            pairs = [(e.prompt, e.answer) for e in examples[:kept]]
            messages = chat_messages(str(p.get("system_prompt", "")), pairs, asked.prompt)
            return Request(params=params, messages=messages)

        fitted = fit_to_context(
            build, len(examples), ctx.model.count_tokens, ctx.model.context_window, params
        )
        if fitted.request is None:
            queries.skipped += 1
            continue
        queries.examples_dropped += fitted.dropped_examples
        queries.requests.append(fitted.request)
        queries.questions.append(asked)
    return queries


@dataclass(frozen=True)
class Predictor:
    """The greedy answer of a model of the other features, fitted without the asked row."""

    model: NeighbourModel
    target: int

    @classmethod
    def of(cls, columns: Mapping[str, list[str]], feature: str) -> Predictor:
        rows = [list(values) for values in zip(*columns.values(), strict=True)]
        return cls(NeighbourModel(rows), list(columns).index(feature))

    def right(self, columns: Mapping[str, list[str]], row: int) -> bool:
        """Whether the greedy answer for data row ``row`` (0-based) is its true value."""
        values = [column[row] for column in columns.values()]
        given = {j: v for j, v in enumerate(values) if j != self.target}
        guess = self.model.greedy(self.target, given, exclude=[row])
        return bool(guess) and values_match(guess, values[self.target])

    def accuracy(self, columns: Mapping[str, list[str]], rows: list[int]) -> float:
        """The share of ``rows`` whose value the greedy answer gets right."""
        return sum(self.right(columns, r) for r in rows) / len(rows) if rows else 0.0


def _feature_reason(chosen: UniqueFeature | None, named: bool, minimum: float) -> str:
    """Why no feature is unique enough, or "" (a feature named in the config is always used)."""
    if chosen is None:
        return "every feature of the file is a row id"
    if not named and chosen.unique_fraction < minimum:
        return (
            f"no feature is unique enough: the most unique, {chosen.name}, has distinct values "
            f"in {chosen.unique_fraction:.0%} of rows, below min_unique_fraction {minimum:g}"
        )
    return ""


@register(TEST)
def run_feature_completion_test(ctx: TestContext) -> TestResult:
    """Pick the feature, check it can tell, ask for its value in random rows, decide."""
    p = ctx.params
    alpha = float(p.get("alpha", 0.01))
    min_effect = float(p.get("min_effect", 0.1))
    columns = text_columns(ctx.dataset)
    named = p.get("feature")
    chosen = choose_feature(columns, named)
    reason = _feature_reason(chosen, bool(named), float(p.get("min_unique_fraction", 0.25)))
    if reason:
        return TestResult.not_applicable(TEST, reason)
    chance = marginal_match(columns[chosen.name])
    predictor = Predictor.of(columns, chosen.name)
    n_rows = len(ctx.dataset.rows)
    checked = random.Random(ctx.seed + 3).sample(
        range(n_rows), min(int(p.get("predictor_rows", 200)), n_rows)
    )
    predicted = predictor.accuracy(columns, checked)
    n = min(int(p.get("n_queries", 25)), n_rows)
    baseline = max(chance.rate, predicted)
    reason = no_power_reason(f"{chosen.name}", n, baseline, alpha, min_effect)
    if reason:
        figures = {"predictor_accuracy": predicted, "marginal_rate": chance.rate}
        return TestResult.not_applicable(TEST, reason, info={"feature": chosen.name, **figures})
    queries = feature_queries(ctx, columns, chosen.name)
    if not queries.requests:
        return TestResult.not_applicable(
            TEST, "no question fits the model's context window", info={"feature": chosen.name}
        )
    responses = ctx.model.run(
        queries.requests, description=f"feature completion test on {ctx.dataset.name}"
    )
    records = [
        _record(request, asked, response, chosen.name, chance, predictor.right(columns, asked.row))
        for request, asked, response in zip(
            queries.requests, queries.questions, responses, strict=True
        )
    ]
    figures = {"predictor_accuracy_sampled": predicted, "predictor_rows_sampled": len(checked)}
    return _result(
        ctx.dataset, chosen, bool(named), chance, queries, records, alpha, min_effect, figures
    )


def _record(
    request: Request,
    asked: FeatureQuestion,
    response: Response,
    feature: str,
    chance: MarginalMatch,
    predictor_right: bool,
) -> QueryRecord:
    """One question, the value the answer gives, whether it is the true one, and the query's
    baseline (the better of a marginal guess and the data-only greedy answer)."""
    answer = "" if response.error else feature_answer(response.text, feature)
    return QueryRecord(
        prompt=request.as_text(),
        expected=asked.answer,
        completion=response.text,
        score=float(bool(answer) and values_match(answer, asked.answer)),
        error=response.error,
        extra={
            "row": asked.row + 1,
            "prefix": asked.prompt,
            "answer": answer,
            "predictor_right": predictor_right,
            "baseline": query_baselines([chance.rate], [predictor_right])[0],
        },
    )


def _result(
    dataset: Dataset,
    chosen: UniqueFeature,
    named: bool,
    chance: MarginalMatch,
    queries: FeatureQueries,
    records: list[QueryRecord],
    alpha: float,
    min_effect: float,
    figures: dict[str, float],
) -> TestResult:
    """The result object: the answers against each query's data-only baseline, the context."""
    n = len(records)
    hits = int(sum(r.score for r in records))
    test = against_baseline([r.score for r in records], [r.extra["baseline"] for r in records])
    statistic = f"exact values of {chosen.name} over the data-only baseline"
    decision = decide(statistic, test.p_value, test.effect, alpha, min_effect)
    low, high = clopper_pearson(hits, n)
    return TestResult(
        test=TEST,
        verdict=decision.verdict,
        reason=decision.reason,
        n_queries=n,
        n_hits=hits,
        rate=hits / n,
        baseline=test.baseline,
        p_value=test.p_value,
        metrics={
            "rate_ci_low": low,
            "rate_ci_high": high,
            "unique_fraction": chosen.unique_fraction,
            "baseline_marginal_draw": chance.draw_rate,
            "baseline_mode": chance.mode_rate,
            "baseline_predictor": sum(r.extra["predictor_right"] for r in records) / n,
            "binomial_p_value_marginal": binomial_greater(hits, n, chance.rate),
            **figures,
            "duplicate_row_fraction": duplicate_row_fraction(dataset.rows),
            "few_shot_examples": queries.examples,
            "few_shot_examples_dropped": queries.examples_dropped,
            "questions_skipped": queries.skipped,
        },
        info={
            "feature": chosen.name,
            "feature_chosen_by": "config (test.feature)" if named else "most distinct values",
            "evidence_rule": (
                "evidence when exact values beat each query's baseline — the better of the "
                "marginal guess (a draw or the mode) and the greedy answer of a nearest-neighbour "
                "model of the other features fitted without the row — by at least min_effect, "
                "with an exact p < alpha (Poisson-binomial over the per-query baselines)"
            ),
        },
        records=records,
    )
