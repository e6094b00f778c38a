"""Conditional completion: given the first features of a real row, is the model's next value one
that some real row with those first values has — more often than a model of the data's
distribution, which has not read the row, could manage?

For each feature after the first, ``n_per_feature`` queries show the values of the features
before it in a random real row, as ``Name = value`` lines, and end with ``Feature =``. The answer
is *valid* when some real row starts with the shown values and has that value next. Each
query's baseline is the best chance of a valid answer that any data-only predictor has on it,
each fitted without the queried row (``tabmem.stats.best_of``): the feature's mode and a draw
from its distribution, the greedy answer of a nearest-neighbour model of the file
(``tabmem.stats.neighbours``), the greedy answer and a draw of the Gaussian copula's
conditional given the shown values (a draw's chance computed exactly from the data). The valid
answers are tested against the mean of those by the count rule (``tabmem.stats.hits``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import (
    Answer,
    Recorded,
    Rescorable,
    Worded,
    count_metrics,
    count_rule,
    register_lifecycle,
    wording_figures,
)
from tabmem.battery.sampling import metric_name
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.values import normalize_value
from tabmem.llm.base import Request
from tabmem.llm.client import LanguageModel
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
from tabmem.stats.best_of import BestOf, ValuePredictors, predictors_of
from tabmem.stats.hits import HitCount, decide_hits
from tabmem.stats.prefixes import PrefixIndex, wilson
from tabmem.stats.samples import data_values


@dataclass(frozen=True)
class ConditionalCompletionSettings(TestSettings):
    """``conf/test/conditional_completion.yaml``."""

    n_per_feature: int
    features: list[str] | None
    alpha: float
    weak_alpha: float
    min_hits: int
    few_shot: int
    few_shot_pool: list[str]
    system_prompt: str
    completion_prompt: str


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


@lru_cache(maxsize=32)
def _longest_values(dataset: Dataset) -> tuple[str, ...]:
    """Each feature's longest value in the file (the first of equal length), read once per
    file for all the models worded on it."""
    columns = zip(*data_values(dataset), strict=True)
    return tuple(max(column, key=len, default="") for column in columns)


def _max_tokens(model: LanguageModel, longest: str) -> int:
    """Room for the feature's longest value in the file, and for a repeated ``Feature =``."""
    return model.count_tokens(longest) + 16


@dataclass(frozen=True)
class Asked:
    """The ``repeat``-th question about one feature. Its generator, seeded by the cell's seed,
    the feature and the repetition, draws the row and then the few-shot examples."""

    repeat: int
    question: Question


def _generator(seed: int, position: int, repeat: int) -> random.Random:
    return random.Random(f"{seed}:{position}:{repeat}")


def _draw(ctx: TestContext, position: int, repeat: int) -> Asked:
    rng = _generator(ctx.seed, position, repeat)
    template = ctx.params.completion_prompt
    return Asked(repeat, make_question(ctx.dataset, template, rng, position))


def _request(
    ctx: TestContext,
    model: LanguageModel,
    pool: list[Dataset],
    asked: Asked,
    max_tokens: int,
) -> tuple[Request | None, int]:
    """The request for one question, with its own few-shot examples; None if it cannot fit."""
    p, question = ctx.params, asked.question
    template = p.completion_prompt
    rng = _generator(ctx.seed, question.position, asked.repeat)
    make_question(ctx.dataset, template, rng, question.position)  # the draw of the row, again
    shots = rng.sample(pool, min(p.few_shot, len(pool)))
    examples = [_example(d, template, rng, question.position) for d in shots]
    chat = model.prompt_form == "chat"
    params = ctx.greedy_answer(max_tokens)

    def build(kept: int) -> Request:
        if chat:
            system = p.system_prompt
            return Request(
                params=params, messages=chat_messages(system, examples[:kept], question.text)
            )
        text = "".join(f"{u} {a}\n\n" for u, a in examples[:kept]) + question.text
        return Request(params=params, prompt=text)

    fitted = fit_to_context(build, len(examples), model.count_tokens, model.context_window, params)
    return fitted.request, fitted.dropped_examples


@dataclass(frozen=True)
class FeatureRates:
    """One feature's valid-completion rate, its data-only baseline (the best predictor's mean
    chance on its queries), the marginal draws' rate alone, and the exact p-value."""

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
    """Per asked feature: the model's rate with a Wilson interval, the data-only baseline (the
    best predictor's mean chance, ``tabmem.stats.best_of``) with a normal interval, and the exact
    binomial p-value of as many valid answers against that baseline."""
    out = []
    for position in sorted({r.extra["position"] for r in records}):
        mine = [r for r in records if r.extra["position"] == position]
        valid = sum(int(r.score) for r in mine)
        chances = np.array([r.extra["marginal_chance"] for r in mine])
        best = BestOf.of([r.extra["baseline_chances"] for r in mine]).best_column
        interval = wilson(valid, len(mine))
        spread = 1.96 * best.std(ddof=1) / np.sqrt(len(mine)) if len(mine) > 1 else 0.0
        baseline = float(best.mean())
        low, high = max(0.0, baseline - spread), min(1.0, baseline + spread)
        out.append(
            FeatureRates(
                feature=names[position],
                position=position,
                n=len(mine),
                valid=valid,
                rate=interval.rate,
                low=interval.low,
                high=interval.high,
                baseline=baseline,
                baseline_low=float(low),
                baseline_high=float(high),
                marginal=float(chances.mean()),
                p_value=HitCount(valid, len(mine), baseline).p_value,
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
        # a rate at an interval's end can lie past it by a rounding error (a baseline of
        # 1 + 1e-15 against its bound of 1): no bar is drawn below zero length
        errors = np.clip(np.vstack([mid_a - np.array(low), np.array(high) - mid_a]), 0.0, None)
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


@dataclass(frozen=True)
class PrefixFacts:
    """The file's features and rows as the scoring reads them: which continuations are valid,
    their marginal chance, and the data-only predictors, each answering without the queried
    row."""

    names: list[str]
    index: PrefixIndex
    predictors: ValuePredictors
    _baselines: dict[Question, QuestionBaseline] = field(
        default_factory=dict, repr=False, compare=False
    )

    def baseline(self, question: Question) -> QuestionBaseline:
        """What the data alone answers to ``question``, computed once for every model whose
        answers these facts score (the in-process calibration shares them)."""
        if question not in self._baselines:
            shown = dict(enumerate(question.prefix))
            greedy = self.predictors.neighbour_guess(question.position, shown, question.row)
            followers = self.index.followers(question.prefix)
            self._baselines[question] = QuestionBaseline(
                greedy=greedy,
                greedy_valid=bool(greedy) and self.index.is_valid(question.prefix, greedy),
                marginal_chance=self.index.marginal_chance(question.prefix),
                chances=self.predictors.chances(question.position, shown, question.row, followers),
            )
        return self._baselines[question]


@dataclass(frozen=True)
class QuestionBaseline:
    """A question's data-only answers: the neighbours' greedy value and whether it is valid,
    the marginal chance of a valid value, and each predictor's chance (``ValuePredictors``)."""

    greedy: str
    greedy_valid: bool
    marginal_chance: float
    chances: dict[str, float]


def shown_pairs(prefix: str) -> tuple[list[tuple[str, str]], str] | None:
    """The ``Name = value`` lines just before a question's last line ``Feature =``, and that
    feature; None when the text does not end so. Lines before the pairs (a dataset's name, a
    few-shot example) are passed over."""
    lines = [line.strip() for line in prefix.strip().splitlines()]
    if not lines or not lines[-1].endswith("="):
        return None
    pairs: list[tuple[str, str]] = []
    for line in reversed(lines[:-1]):
        name, sep, value = line.partition(" = ")
        if not sep:
            break
        pairs.append((name.strip(), value.strip()))
    return pairs[::-1], lines[-1][:-1].strip()


@lru_cache(maxsize=32)
def _row_starts(dataset: Dataset, position: int) -> dict[tuple[str, ...], int]:
    """The first row (0-based) that begins with each normalized run of ``position`` values."""
    starts: dict[tuple[str, ...], int] = {}
    for row, values in enumerate(data_values(dataset)):
        starts.setdefault(tuple(normalize_value(v) for v in values[:position]), row)
    return starts


@register_lifecycle
class ConditionalCompletion(Rescorable[Asked, PrefixFacts]):
    """Ask for the next feature of real row beginnings; compare validity, query by query, with
    what a model of the distribution that has not read the row could reach."""

    name = "conditional_completion"
    table_order = 5
    claims = "rows_seen"
    title = "conditional completion"
    settings = ConditionalCompletionSettings

    def pick(self, ctx: TestContext) -> list[Asked]:
        n = ctx.params.n_per_feature
        return [
            _draw(ctx, position, repeat)
            for position in _positions(ctx.dataset, ctx.params.features)
            for repeat in range(n)
        ]

    def prepare(self, ctx: TestContext, queries: Sequence[Asked]) -> PrefixFacts | TestResult:
        names = feature_names(ctx.dataset)
        if len(names) < 2:
            return TestResult.not_applicable(self.name, "the dataset has fewer than two features")
        rows = data_values(ctx.dataset)
        return PrefixFacts(names, PrefixIndex(rows), predictors_of(ctx.dataset))

    def locate(self, ctx: TestContext, recorded: Recorded) -> Asked | str:
        """The question a recorded line asked: ``Name = value`` lines of the file's first
        features, in order, ending in the next feature's ``Feature =``; its row is the first
        real row that begins with the shown values (the row left out of the greedy answer)."""
        names = feature_names(ctx.dataset)
        shown = shown_pairs(recorded.prefix)
        if shown is None:
            return "it does not end in 'Feature =' after 'Name = value' lines"
        pairs, asked = shown
        position = len(pairs)
        if position == 0:
            return "it shows no feature before the asked one (the test asks from the second on)"
        if [name for name, _ in pairs] + [asked] != names[: position + 1]:
            return "its features are not the file's first features in order"
        values = tuple(value for _, value in pairs)
        row = _row_starts(ctx.dataset, position).get(tuple(normalize_value(v) for v in values))
        if row is None:
            return "no row of the file begins with the values it shows"
        truth = row_values(ctx.dataset, row)[position]
        return Asked(recorded.line, Question(row, position, recorded.prompt, values, truth))

    def word(self, ctx: TestContext, queries: Sequence[Asked], facts: PrefixFacts) -> Worded[Asked]:
        model = ctx.model_for("Wording")
        pool = example_pool(ctx.dataset, ctx.params.few_shot_pool)
        longest = _longest_values(ctx.dataset)
        worded: Worded[Asked] = Worded([], [])
        dropped = 0
        for asked in queries:
            max_tokens = _max_tokens(model, longest[asked.question.position])
            request, lost = _request(ctx, model, pool, asked, max_tokens)
            if request is not None:
                worded.queries.append(asked)
                worded.requests.append(request)
                dropped += lost
        worded.context = {"few_shot_examples_dropped": dropped}
        return worded

    def score(self, ctx: TestContext, facts: PrefixFacts, answer: Answer[Asked]) -> QueryRecord:
        question, response, names = answer.query.question, answer.response, facts.names
        asked_for = names[question.position]
        given = "" if response.error else read_value(response.text, asked_for, names)
        valid = bool(given) and facts.index.is_valid(question.prefix, given)
        baseline = facts.baseline(question)
        return QueryRecord(
            prompt=answer.prompt,
            expected=question.truth,
            completion=response.text,
            score=float(valid),
            error=response.error,
            extra={
                "feature": asked_for,
                "position": question.position,
                "row": question.row + 1,
                "answer": given,
                "marginal_chance": baseline.marginal_chance,
                "greedy_answer": baseline.greedy,
                "greedy_valid": baseline.greedy_valid,
                "baseline_chances": dict(baseline.chances),
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: PrefixFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        return _result(ctx, facts.names, list(records), context)


def _result(
    ctx: TestContext, names: list[str], records: list[QueryRecord], context: dict[str, Any]
) -> TestResult:
    """Valid answers against the data-only baseline, per feature and overall; the verdict."""
    p = ctx.params
    rates = feature_rates(names, records)
    best = BestOf.of([r.extra["baseline_chances"] for r in records])
    test = HitCount(sum(int(r.score) for r in records), len(records), best.rate)
    decision = decide_hits(
        f"valid completions over the data-only baseline ({best.sentence()})",
        test,
        count_rule(p),
        test.p_value,
    )
    reason = (
        f"{test.rate:.0%} of completions are valid against {test.baseline:.0%} for a model of "
        f"the data's distribution without the row; {decision.reason}"
    )
    model = ctx.model.name if ctx.model is not None else "transcript"
    title = f"{model} on {ctx.dataset.name}: conditional completion"
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
            **wording_figures(context),
            **count_metrics(test),
            **best.metrics(),
            "features_asked": len(rates),
            "features_significant": sum(r.p_value < p.alpha for r in rates),
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
                f"valid answers beyond the data-only baseline, exact binomial p < {p.alpha} "
                f"from at least {p.min_hits} valid answers; the baseline is the best data-only "
                "predictor's mean chance of a valid answer over the queries (mode, marginal "
                "draw, nearest neighbours, the copula's conditional greedy or drawn, each "
                "fitted without the queried row)"
            ),
            "baseline_set_by": best.leader(),
            "prompt_form": ctx.prompt_form,
        },
        records=records,
        tables={"feature_rates.json": _rates_table(rates)},
        figures={"conditional_completion.png": rates_figure(rates, title)},
    )
