"""The feature completion test: given every other feature of a row, can the model name the
value of a highly unique one?

The prompt lists a random row's features as ``Feature = Value`` lines, leaving out one
feature with many distinct values (a name, a measurement with many decimals), and ends with
``Feature =``. Many distinct values do not make a feature unguessable: iris' petal length
follows from the species and the petal width. So the baseline is the best that any
data-only predictor reaches on the queried rows, each fitted without the queried row
(``tabmem.stats.best_of``): the column's mode and a draw from it, the greedy answer of a
nearest-neighbour model of the other features, the greedy answer and a draw of the Gaussian
copula's conditional. Exact answers beyond the best one's rate (or the file's marginal rate,
``file rate``, where that is higher) point to memory of the rows (``tabmem.stats.hits``). A
feature the predictors get too well leaves no room for memory to show, and the test does not
apply.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import (
    Answer,
    Recorded,
    Rescorable,
    Worded,
    against_best_predictor,
    count_rule,
    register_lifecycle,
    wording_figures,
)
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.values import normalize_value
from tabmem.errors import ConfigError
from tabmem.llm.base import Request
from tabmem.prompts.fewshot import chat_messages, few_shot_datasets, fit_to_context
from tabmem.prompts.observations import parse_observation
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.answers import feature_answer, values_match
from tabmem.stats.baselines import MarginalMatch, marginal_match
from tabmem.stats.best_of import NEIGHBOURS, BestOf, ValuePredictors, predictors_of
from tabmem.stats.hits import unreachable_reason
from tabmem.stats.pvalues import binomial_greater
from tabmem.stats.uniqueness import (
    UniqueFeature,
    duplicate_row_fraction,
    most_unique_feature,
    text_columns,
    unique_fraction,
)


@dataclass(frozen=True)
class FeatureCompletionSettings(TestSettings):
    """``conf/test/feature_completion.yaml``."""

    n_queries: int
    feature: str | None
    min_unique_fraction: float
    alpha: float
    weak_alpha: float
    min_hits: int
    extra_tokens: int
    few_shot: int
    few_shot_pool: list[str]
    system_prompt: str


TEST = "feature_completion"


@dataclass(frozen=True)
class FeatureQuestion:
    """One row's other features as ``Feature = Value`` lines ending in ``feature =``."""

    row: int
    prompt: str
    answer: str
    feature: str


def question(columns: Mapping[str, list[str]], row: int, feature: str) -> FeatureQuestion:
    """The question for data row ``row`` (0-based): the other features in file order, then
    the asked one."""
    lines = [f"{name} = {values[row]}" for name, values in columns.items() if name != feature]
    return FeatureQuestion(row, "\n".join([*lines, f"{feature} ="]), columns[feature][row], feature)


def asked_feature(recorded: Recorded) -> str:
    """The feature a recorded question asks: its last line ``Feature =``, or in the one-line
    layout (``name = value, name = value``) the name of its recorded ``Feature = value`` suffix
    or answer."""
    lines = [line.strip() for line in recorded.prefix.strip().splitlines()]
    last = lines[-1] if lines else ""
    if last.endswith("="):
        return last[:-1].strip()
    for text in (recorded.suffix, recorded.response):
        name, sep, _ = text.strip().partition(" = ")
        if sep:
            return name.strip()
    return ""


def shown_values(names: Sequence[str], recorded: Recorded) -> dict[str, str] | str:
    """The ``Feature = Value`` pairs a recorded question shows, or why they cannot be read:
    one pair a line before the asked ``Feature =``, or one line of comma-joined pairs."""
    prefix = recorded.prefix.strip()
    lines = prefix.splitlines()
    if lines and lines[-1].strip().endswith("="):
        given: dict[str, str] = {}
        for line in lines[:-1]:
            name, sep, value = line.partition(" = ")
            if not sep or name.strip() not in names:
                return f"the line {line.strip()!r} is not a 'Feature = Value' line of the file"
            given[name.strip()] = value.strip()
        return given
    observation = parse_observation(prefix, names)
    first = prefix.split(" = ", 1)[0].strip()
    if not observation.values or first not in names:
        return "its first 'name = value' pair does not name a feature of the file"
    return observation.values


@lru_cache(maxsize=8)
def _normalized_rows(dataset: Dataset) -> tuple[dict[str, list[str]], list[tuple[str, ...]]]:
    """The dataset's columns as text, and its rows with every value normalized (missing as "",
    numbers by value), so ``27`` and ``27.0`` or an empty cell and ``nan`` are one value."""
    columns = text_columns(dataset)
    rows = zip(*([normalize_value(v) for v in values] for values in columns.values()), strict=True)
    return columns, list(rows)


def locate_question(dataset: Dataset, recorded: Recorded) -> FeatureQuestion | str:
    """The row a recorded question describes: every value it shows matches the row's (values
    compared as ``normalize_value`` writes them), and a recorded true value (suffix, bare or as
    ``Feature = value``) is the asked feature's value in it."""
    columns, rows = _normalized_rows(dataset)
    names = list(columns)
    feature = asked_feature(recorded)
    if feature not in names:
        return f"it asks for {feature!r}, which is not a feature of the file"
    given = shown_values(names, recorded)
    if isinstance(given, str):
        return given
    wanted = [(names.index(n), normalize_value(v)) for n, v in given.items() if n != feature]
    truth = feature_answer(recorded.suffix, feature) if recorded.suffix.strip() else None
    target = names.index(feature)
    for row, values in enumerate(rows):
        if all(values[j] == v for j, v in wanted):
            if truth is not None and values[target] != normalize_value(truth):
                continue
            return question(columns, row, feature)
    return "no row of the file has the values it shows"


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
    found = few_shot_datasets(ctx.dataset, p.few_shot_pool, p.few_shot, rng)
    examples = []
    for dataset in found:
        columns = text_columns(dataset)
        feature = most_unique_feature(columns)
        if feature is not None and dataset.rows:
            examples.append(question(columns, rng.randrange(len(dataset.rows)), feature.name))
    return examples


def word_questions(
    ctx: TestContext, questions: Sequence[FeatureQuestion]
) -> Worded[FeatureQuestion]:
    """Requests for the questions; chat adds few-shot questions from other datasets."""
    p = ctx.params
    model = ctx.model_for("Wording")
    chat = model.prompt_form == "chat"
    examples = _examples(ctx, random.Random(ctx.seed + 1)) if chat else []
    worded: Worded[FeatureQuestion] = Worded([], [])
    dropped = skipped = 0
    for asked in questions:
        params = ctx.greedy_answer(model.count_tokens(asked.answer) + p.extra_tokens)

        def build(kept: int, asked=asked, params=params) -> Request:
            if not chat:
                return Request(params=params, prompt=asked.prompt)
            pairs = [(e.prompt, e.answer) for e in examples[:kept]]
            messages = chat_messages(p.system_prompt, pairs, asked.prompt)
            return Request(params=params, messages=messages)

        fitted = fit_to_context(
            build, len(examples), model.count_tokens, model.context_window, params
        )
        if fitted.request is None:
            skipped += 1
            continue
        dropped += fitted.dropped_examples
        worded.requests.append(fitted.request)
        worded.queries.append(asked)
    worded.context = {
        "few_shot_examples": len(examples),
        "few_shot_examples_dropped": dropped,
        "questions_skipped": skipped,
    }
    return worded


def query_chances(
    predictors: ValuePredictors,
    columns: Mapping[str, list[str]],
    row: int,
    feature: str,
) -> dict[str, float]:
    """Each data-only predictor's chance of naming data row ``row``'s value of ``feature``
    from its other values, fitted without the row."""
    target = list(columns).index(feature)
    values = [column[row] for column in columns.values()]
    given = {j: v for j, v in enumerate(values) if j != target}
    return predictors.chances(target, given, row, [values[target]])


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


@dataclass(frozen=True)
class FeatureFacts:
    """What the decision needs: the feature, the marginal guesses, and each queried row's
    data-only predictors' chances (data row -> predictor -> chance)."""

    chosen: UniqueFeature
    named: bool
    chance: MarginalMatch
    chances: dict[int, dict[str, float]]


@register_lifecycle
class FeatureCompletion(Rescorable[FeatureQuestion, FeatureFacts]):
    """Pick the feature, check it can tell, ask for its value in random rows, decide."""

    name = TEST
    table_order = 3
    claims = "rows_seen"
    title = "feature completion"
    settings = FeatureCompletionSettings
    min_columns = 2
    nothing_fits = "no question fits the model's context window"

    def pick(self, ctx: TestContext) -> list[FeatureQuestion]:
        columns = text_columns(ctx.dataset)
        chosen = choose_feature(columns, ctx.params.feature)
        if chosen is None:
            return []
        n_rows = len(ctx.dataset.rows)
        n = min(ctx.params.n_queries, n_rows)
        rows = random.Random(ctx.seed).sample(range(n_rows), n)
        return [question(columns, row, chosen.name) for row in rows]

    def prepare(
        self, ctx: TestContext, queries: Sequence[FeatureQuestion]
    ) -> FeatureFacts | TestResult:
        p = ctx.params
        columns = text_columns(ctx.dataset)
        named = p.feature
        chosen = choose_feature(columns, named)
        reason = _feature_reason(chosen, bool(named), p.min_unique_fraction)
        if reason or chosen is None:
            return TestResult.not_applicable(TEST, reason)
        chance = marginal_match(columns[chosen.name])
        predictors = predictors_of(ctx.dataset)
        chances = {q.row: query_chances(predictors, columns, q.row, chosen.name) for q in queries}
        best = BestOf.of([chances[q.row] for q in queries], floor=chance.rate)
        reason = unreachable_reason(len(queries), best.rate, count_rule(p), chosen.name)
        if reason:
            figures = {"predictor_accuracy": best.rate, "marginal_rate": chance.rate}
            info = {"feature": chosen.name, **figures, "baseline_set_by": best.leader()}
            return TestResult.not_applicable(TEST, reason, info=info)
        return FeatureFacts(chosen, bool(named), chance, chances)

    def word(
        self, ctx: TestContext, queries: Sequence[FeatureQuestion], facts: FeatureFacts
    ) -> Worded[FeatureQuestion]:
        return word_questions(ctx, queries)

    def locate(self, ctx: TestContext, recorded: Recorded) -> FeatureQuestion | str:
        return locate_question(ctx.dataset, recorded)

    def settings_for(self, recorded: Sequence[Recorded]) -> dict[str, Any]:
        """A transcript asks its own feature: the most often asked one is the test's."""
        asked = Counter(asked_feature(r) for r in recorded)
        return {"feature": asked.most_common(1)[0][0]} if asked else {}

    def score(
        self, ctx: TestContext, facts: FeatureFacts, answer: Answer[FeatureQuestion]
    ) -> QueryRecord:
        """The value the answer gives, whether it is the true one, and each data-only
        predictor's chance on this row."""
        asked, response = answer.query, answer.response
        feature = facts.chosen.name
        given = "" if response.error else feature_answer(response.text, feature)
        chances = facts.chances[asked.row]
        return QueryRecord(
            prompt=answer.prompt,
            expected=asked.answer,
            completion=response.text,
            score=float(bool(given) and values_match(given, asked.answer)),
            error=response.error,
            extra={
                "row": asked.row + 1,
                "prefix": asked.prompt,
                "answer": given,
                "baseline_chances": chances,
                "baseline": max(chances.values()),
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: FeatureFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        """The answers against each query's data-only baseline, and the context."""
        chosen, chance = facts.chosen, facts.chance
        n = len(records)
        hits = int(sum(r.score for r in records))
        best = BestOf.of([r.extra["baseline_chances"] for r in records], floor=chance.rate)
        return against_best_predictor(
            ctx,
            TEST,
            f"exact values of {chosen.name} over the data-only baseline ({best.sentence()})",
            records,
            best.rate,
            metrics={
                **best.metrics(),
                "unique_fraction": chosen.unique_fraction,
                "baseline_marginal_draw": chance.draw_rate,
                "baseline_mode": chance.mode_rate,
                "baseline_predictor": best.accuracies().get(NEIGHBOURS, 0.0),
                "binomial_p_value_marginal": binomial_greater(hits, n, chance.rate),
                "duplicate_row_fraction": duplicate_row_fraction(ctx.dataset.rows),
                **wording_figures(context),
            },
            info={
                "feature": chosen.name,
                "feature_chosen_by": (
                    "config (test.feature)" if facts.named else "most distinct values"
                ),
                "baseline_set_by": best.leader(),
                "evidence_rule": (
                    "evidence when exact values beat the baseline — the best data-only "
                    "predictor's mean chance over the queries (mode, marginal draw, nearest "
                    "neighbours, the copula's conditional greedy or drawn, each fitted without "
                    "the queried row), or the file's marginal rate where higher — with "
                    "an exact binomial p < alpha from at least min_hits hits"
                ),
            },
        )
