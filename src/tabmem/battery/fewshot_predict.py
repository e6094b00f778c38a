"""Few-shot prediction (``test=fewshot_predict``): how well does the model predict the target?

Each test row is asked as ``IF Feature = Value, … THEN Target =`` after ``n_shots`` examples
drawn at random from the rows outside its block (``tabmem.data.splits``), stratified to the
label frequencies, each example's label given as the answer. The answer is read with
``tabmem.stats.labels.parse_label``; an answer that gives no label is wrong and counted apart.
A statistical baseline (``model=logistic-regression`` …) is instead fitted on all rows outside
the block and predicts the block, so its accuracy is measured on exactly the same rows.

Run on ``original``, ``perturbed``, ``task`` and ``statistical`` versions of a dataset, the
accuracies show the second paper's result: a model that memorized a dataset loses accuracy
when the data no longer looks like the file it saw; on a dataset it never saw, it does not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, Lifecycle, Worded, register_lifecycle
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.prediction import PredictionData, prediction_data
from tabmem.data.splits import Block, holdout_blocks, stratified_sample
from tabmem.data.transforms import spec_of, transform_name
from tabmem.llm.base import FIT, GENERATE, FitRequest, Request
from tabmem.prompts.fewshot import fit_to_context
from tabmem.prompts.ifthen import IfThenFormat, ifthen_request
from tabmem.results import QueryRecord, TestResult, Verdict
from tabmem.stats.accuracy import Accuracy, p_above
from tabmem.stats.labels import parse_label
from tabmem.stats.verdicts import decide as shared_rule


@dataclass(frozen=True)
class FewshotPredictSettings(TestSettings):
    """``conf/test/fewshot_predict.yaml``."""

    n_shots: int
    shot_sets: int
    n_test_rows: int
    max_test_fraction: float
    max_classes: int
    alpha: float
    min_effect: float
    question: str
    pair: str
    joiner: str
    prompt_style: dict[str, str]
    default_style: str
    default_task: str
    system_prompts: dict[str, str]


NAME = "fewshot_predict"


@dataclass
class Prediction:
    """One test row: what was asked, the true label, the answer and the label read from it."""

    row: int
    block: int
    prompt: str
    expected: str
    completion: str
    label: str | None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.error is None and self.label == self.expected


def not_applicable_reason(data: PredictionData | None, max_classes: int) -> str | None:
    """Why the dataset cannot be a classification problem, or None when it can."""
    if data is None:
        return "the dataset has no target column to predict"
    classes = len(data.classes)
    if classes > max_classes:
        return (
            f"the target '{data.target}' has {classes} distinct values, more than "
            f"max_classes={max_classes}: a regression target, not a class label"
        )
    if classes < 2:
        return f"the target '{data.target}' has fewer than two classes"
    if len(data.labels) < 3:
        return "fewer than three rows have a label"
    return None


def system_prompt(dataset: Dataset, target: str, params: FewshotPredictSettings) -> tuple[str, str]:
    """The system prompt for the dataset's transform, and its style (named, task or plain).

    Only ``named`` mentions the dataset; by default ``original`` and ``perturbed`` get it, as
    in the paper, and a perturbed dataset keeps the original's name, description and task, so
    both get the same prompt word for word.
    """
    style = params.prompt_style.get(transform_name(dataset), params.default_style)
    task = spec_of(dataset).task or params.default_task.format(target=target)
    template = params.system_prompts.get(style, "")
    label = dataset.spec.aliases[0] if dataset.spec.aliases else dataset.name
    text = template.format(
        dataset=label, description=dataset.spec.description, task=task, target=target
    )
    return " ".join(text.split()), style


def _questions(data: PredictionData, fmt: IfThenFormat) -> list[str]:
    return [fmt.ask(data.features, values, data.target) for values in data.values]


def example_plan(
    data: PredictionData, block: Block, number: int, n_shots: int, shot_sets: int, seed: int
) -> list[tuple[int, int, list[int]]]:
    """(test row, shot set, example rows) for each test row of a block, in asking order.

    ``shot_sets`` 0: every test row gets its own seeded draw of examples. ``shot_sets`` k > 0:
    the block draws k example sets and its test rows take them in turn; rows sharing a set
    are asked one after another, so a local model reuses the set's prompt prefix (its KV
    cache) and evaluates only the question, many times faster.
    """
    if shot_sets <= 0:
        return [
            (
                i,
                -1,
                stratified_sample(
                    data.labels, block.train, n_shots, np.random.default_rng([seed, data.rows[i]])
                ),
            )
            for i in block.test
        ]
    sets = [
        stratified_sample(
            data.labels, block.train, n_shots, np.random.default_rng([seed, number, k])
        )
        for k in range(shot_sets)
    ]
    plan = [(i, n % shot_sets, sets[n % shot_sets]) for n, i in enumerate(block.test)]
    return sorted(plan, key=lambda entry: entry[1])


@dataclass(frozen=True)
class Asked:
    """One held-out row ``index`` of block ``block``, with the example rows shown before it
    (``shot_set`` -1: its own draw)."""

    block: int
    index: int
    shot_set: int
    examples: tuple[int, ...]
    shots_kept: int = 0


@dataclass(frozen=True)
class PredictionFacts:
    """The classification problem, its held-out blocks, each row's question, the system
    prompt and its style."""

    data: PredictionData
    blocks: list[Block]
    questions: list[str]
    system: str
    style: str


def _fit_requests(
    data: PredictionData,
    blocks: Sequence[Block],
    queries: Sequence[Asked],
    questions: list[str],
    seed: int,
) -> list[FitRequest]:
    """A baseline's requests: each block's rows labelled by one fit on its training rows."""
    frames = {
        number: (data.frame(block.train), data.frame(block.test))
        for number, block in enumerate(blocks)
    }
    kinds = tuple(data.kind_map().items())
    return [
        FitRequest(
            train=frames[q.block][0],
            labels=tuple(data.labels[i] for i in blocks[q.block].train),
            test=frames[q.block][1],
            kinds=kinds,
            seed=seed + q.block,
            row=blocks[q.block].test.index(q.index),
            prompt=questions[q.index],
        )
        for q in queries
    ]


def _prediction(data: PredictionData, record: QueryRecord) -> Prediction:
    """A record read back as the prediction the decision counts."""
    parsed = record.extra["parsed"]
    return Prediction(
        row=record.extra["row"],
        block=record.extra["block"],
        prompt=record.prompt,
        expected=record.expected,
        completion=record.completion,
        label=parsed or None,
        error=record.error,
    )


@register_lifecycle
class FewshotPredict(Lifecycle[Asked, PredictionFacts]):
    """Predict held-out rows from few-shot examples (or fit a baseline); score the accuracy."""

    name = NAME
    claims = "learning"
    title = "few-shot prediction"
    settings = FewshotPredictSettings
    needs = frozenset({GENERATE, FIT})
    nothing_fits = "no test row's prompt fits the model's context window"

    def plan(self, ctx: TestContext) -> tuple[list[Asked], PredictionFacts] | TestResult:
        p = ctx.params
        data = prediction_data(ctx.dataset)
        reason = not_applicable_reason(data, p.max_classes)
        if reason or data is None:
            return TestResult.not_applicable(NAME, reason or "no data")
        blocks = holdout_blocks(
            len(data.labels),
            p.n_test_rows,
            p.max_test_fraction,
            ctx.seed,
        )
        questions = _questions(data, IfThenFormat(p.question, p.pair, p.joiner))
        system, style = system_prompt(ctx.dataset, data.target, p)
        n_shots, shot_sets = p.n_shots, p.shot_sets
        fits = ctx.model is not None and GENERATE not in ctx.model.capabilities
        queries = [
            Asked(number, i, -1, ()) if fits else Asked(number, i, shot_set, tuple(examples))
            for number, block in enumerate(blocks)
            for i, shot_set, examples in (
                [(i, -1, []) for i in block.test]
                if fits
                else example_plan(data, block, number, n_shots, shot_sets, ctx.seed)
            )
        ]
        return queries, PredictionFacts(data, blocks, questions, system, style)

    def word(
        self, ctx: TestContext, queries: Sequence[Asked], facts: PredictionFacts
    ) -> Worded[Asked]:
        model = ctx.model_for("Wording")
        data, questions = facts.data, facts.questions
        if GENERATE not in model.capabilities:
            requests = _fit_requests(data, facts.blocks, queries, questions, ctx.seed)
            context = {"few_shot_examples_dropped": 0, "queries_skipped": 0}
            return Worded(list(queries), list(requests), context)
        chat = model.prompt_form == "chat"
        answer_tokens = max(model.count_tokens(c) for c in data.classes)
        params = ctx.greedy_answer(answer_tokens + model.count_tokens(data.target) + 8)
        worded: Worded[Asked] = Worded([], [])
        dropped = skipped = 0
        for asked in queries:
            shots = [(questions[j], data.labels[j]) for j in asked.examples]

            def build(
                kept: int, shots: list = shots, question: str = questions[asked.index]
            ) -> Request:
                return ifthen_request(chat, facts.system, shots[:kept], question, params)

            fitted = fit_to_context(
                build, len(shots), model.count_tokens, model.context_window, params
            )
            if fitted.request is None:
                skipped += 1
                continue
            dropped += fitted.dropped_examples
            worded.queries.append(replace(asked, shots_kept=len(shots) - fitted.dropped_examples))
            worded.requests.append(fitted.request)
        worded.context = {"few_shot_examples_dropped": dropped, "queries_skipped": skipped}
        return worded

    def score(self, ctx: TestContext, facts: PredictionFacts, answer: Answer[Asked]) -> QueryRecord:
        data, asked, response = facts.data, answer.query, answer.response
        fitted = isinstance(answer.request, FitRequest)
        if fitted:
            label: str | None = response.text
            extra: dict[str, Any] = {"fit": response.detail}
        else:
            label = (
                None if response.error else parse_label(response.text, data.classes, data.target)
            )
            extra = {"shots": asked.shots_kept, "shot_set": asked.shot_set}
        prediction = Prediction(
            row=data.rows[asked.index],
            block=asked.block,
            prompt=answer.request.prompt if fitted else answer.prompt,
            expected=data.labels[asked.index],
            completion=response.text,
            label=label,
            error=response.error,
            extra=extra,
        )
        return _records([prediction])[0]

    def decide(
        self,
        ctx: TestContext,
        facts: PredictionFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        predictions = [_prediction(facts.data, r) for r in records]
        result = _result(
            ctx, facts.data, facts.blocks, predictions, context, facts.system, facts.style
        )
        result.records = list(records)
        return result


def majority_hits(data: PredictionData, blocks: Sequence[Block]) -> int:
    """Test rows whose label is their block's most frequent training label (ties: the first
    label in sorted order): the hits of always answering the majority class."""
    hits = 0
    for block in blocks:
        counts = Counter(data.labels[i] for i in block.train)
        majority = min(counts, key=lambda label: (-counts[label], label))
        hits += sum(1 for i in block.test if data.labels[i] == majority)
    return hits


def decide(
    accuracy: Accuracy, baseline: float, p_value: float, alpha: float, min_effect: float
) -> tuple[Verdict, str]:
    """Evidence of predictive skill: the shared rule (``stats.verdicts``) on the accuracy's gap
    over the majority-class rate."""
    statistic = (
        f"accuracy {accuracy.rate:.3f} over the majority-class rate {baseline:.3f} "
        f"({accuracy.n} rows)"
    )
    decision = shared_rule(statistic, p_value, accuracy.rate - baseline, alpha, min_effect)
    return decision.verdict, decision.reason


def confusion_table(predictions: Sequence[Prediction], classes: Sequence[str]) -> pd.DataFrame:
    """Counts of true label × predicted label, with ``(unparseable)`` and ``(failed)`` columns."""
    columns = [*classes, "(unparseable)", "(failed)"]
    counts = {c: dict.fromkeys(columns, 0) for c in classes}
    for p in predictions:
        key = "(failed)" if p.error else p.label if p.label is not None else "(unparseable)"
        counts[p.expected][key] += 1
    return pd.DataFrame([{"label": c, **counts[c]} for c in classes])


def _records(predictions: Sequence[Prediction]) -> list[QueryRecord]:
    return [
        QueryRecord(
            prompt=p.prompt,
            expected=p.expected,
            completion=p.completion,
            score=1.0 if p.correct else 0.0,
            error=p.error,
            extra={
                "row": p.row,
                "block": p.block,
                "parsed": p.label or "",
                "unparseable": p.error is None and p.label is None,
                **p.extra,
            },
        )
        for p in predictions
    ]


def _result(
    ctx: TestContext,
    data: PredictionData,
    blocks: Sequence[Block],
    predictions: list[Prediction],
    counts: dict[str, int],
    system: str,
    style: str,
) -> TestResult:
    p = ctx.params
    kept = {pr.row for pr in predictions}
    scored = [Block(tuple(i for i in b.test if data.rows[i] in kept), b.train) for b in blocks]
    accuracy = Accuracy(sum(pr.correct for pr in predictions), len(predictions))
    baseline = majority_hits(data, scored) / accuracy.n
    p_value = p_above(accuracy.correct, accuracy.n, baseline)
    alpha, min_effect = p.alpha, p.min_effect
    verdict, reason = decide(accuracy, baseline, p_value, alpha, min_effect)
    unparseable = sum(1 for pr in predictions if pr.error is None and pr.label is None)
    answered = sum(1 for pr in predictions if pr.label is not None)
    low, high = accuracy.interval
    metrics = {
        "accuracy": accuracy.rate,
        "accuracy_se": accuracy.standard_error,
        "accuracy_ci_low": low,
        "accuracy_ci_high": high,
        "majority_baseline": baseline,
        "n_unparseable": unparseable,
        "parsed_accuracy": accuracy.correct / answered if answered else 0.0,
        "n_classes": len(data.classes),
        "n_shots": p.n_shots,
        "shot_sets": p.shot_sets,
        "n_blocks": len(blocks),
        "min_train_rows": min(len(b.train) for b in blocks),
        **counts,
    }
    return TestResult(
        test=NAME,
        verdict=verdict,
        reason=reason,
        n_queries=accuracy.n,
        n_hits=accuracy.correct,
        rate=accuracy.rate,
        baseline=baseline,
        p_value=p_value,
        metrics=metrics,
        info={
            "evidence_rule": (
                f"one-sided binomial p < {alpha:g} against the majority-class rate and "
                f"accuracy at least {min_effect:g} above it"
            ),
            "transform": transform_name(ctx.dataset),
            "prompt_style": style,
            "dataset_named": style == "named",
            "system_prompt": system,
            "prompt_form": (
                "baseline"
                if ctx.model is not None and GENERATE not in ctx.model.capabilities
                else ctx.prompt_form
            ),
            "target": data.target,
            "classes": data.classes,
        },
        records=_records(predictions),
        tables={"confusion.json": confusion_table(predictions, data.classes)},
    )
