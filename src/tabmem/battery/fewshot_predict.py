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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tabmem.battery.base import TestContext, register
from tabmem.data import Dataset
from tabmem.data.prediction import PredictionData, prediction_data
from tabmem.data.splits import Block, holdout_blocks, stratified_sample
from tabmem.data.transforms import spec_of, transform_name
from tabmem.llm.base import FIT, GENERATE, GenerationParams, Request
from tabmem.llm.baselines import BaselineBackend, baseline_of
from tabmem.prompts.fewshot import fit_to_context
from tabmem.prompts.ifthen import IfThenFormat, ifthen_request
from tabmem.results import QueryRecord, TestResult, Verdict
from tabmem.stats.accuracy import Accuracy, p_above
from tabmem.stats.labels import parse_label
from tabmem.stats.verdicts import decide as shared_rule

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


def system_prompt(dataset: Dataset, target: str, params: Mapping[str, Any]) -> tuple[str, str]:
    """The system prompt for the dataset's transform, and its style (named, task or plain).

    Only ``named`` mentions the dataset; by default ``original`` and ``perturbed`` get it, as
    in the paper, and a perturbed dataset keeps the original's name, description and task, so
    both get the same prompt word for word.
    """
    styles = params.get("prompt_style") or {}
    style = str(styles.get(transform_name(dataset), params.get("default_style", "task")))
    task = spec_of(dataset).task or str(params.get("default_task", "")).format(target=target)
    template = str((params.get("system_prompts") or {}).get(style, ""))
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


def _llm_predictions(
    ctx: TestContext,
    data: PredictionData,
    blocks: Sequence[Block],
    questions: Sequence[str],
    system: str,
) -> tuple[list[Prediction], dict[str, int]]:
    """Ask every test row after its few-shot examples; read a label from each answer."""
    chat = ctx.model.prompt_form == "chat"
    n_shots = int(ctx.params.get("n_shots", 20))
    answer_tokens = max(ctx.model.count_tokens(c) for c in data.classes)
    params = GenerationParams(
        max_tokens=answer_tokens + ctx.model.count_tokens(data.target) + 8,
        temperature=0.0,
        stop=() if chat else ("\n",),
        seed=ctx.seed,
    )
    requests: list[Request] = []
    pending: list[Prediction] = []
    counts = {"few_shot_examples_dropped": 0, "queries_skipped": 0}
    shot_sets = int(ctx.params.get("shot_sets", 0))
    for number, block in enumerate(blocks):
        for i, shot_set, examples in example_plan(
            data, block, number, n_shots, shot_sets, ctx.seed
        ):
            shots = [(questions[j], data.labels[j]) for j in examples]

            def build(kept: int, shots: list = shots, question: str = questions[i]) -> Request:
                return ifthen_request(chat, system, shots[:kept], question, params)

            fitted = fit_to_context(
                build, len(shots), ctx.model.count_tokens, ctx.model.context_window, params
            )
            if fitted.request is None:
                counts["queries_skipped"] += 1
                continue
            counts["few_shot_examples_dropped"] += fitted.dropped_examples
            requests.append(fitted.request)
            pending.append(
                Prediction(
                    row=data.rows[i],
                    block=number,
                    prompt=fitted.request.as_text(),
                    expected=data.labels[i],
                    completion="",
                    label=None,
                    extra={"shots": len(shots) - fitted.dropped_examples, "shot_set": shot_set},
                )
            )
    responses = ctx.model.run(requests, description=f"{NAME} on {ctx.dataset.name}")
    for prediction, response in zip(pending, responses, strict=True):
        prediction.completion = response.text
        prediction.error = response.error
        if response.error is None:
            prediction.label = parse_label(response.text, data.classes, data.target)
    return pending, counts


def _baseline_predictions(
    baseline: BaselineBackend,
    data: PredictionData,
    blocks: Sequence[Block],
    questions: Sequence[str],
    seed: int,
) -> tuple[list[Prediction], dict[str, int]]:
    """Fit the baseline on each block's training rows and predict the block's rows."""
    predictions = []
    for number, block in enumerate(blocks):
        fitted = baseline.fit_predict(
            data.frame(block.train),
            [data.labels[i] for i in block.train],
            data.frame(block.test),
            data.kind_map(),
            seed + number,
        )
        for i, label in zip(block.test, fitted.labels, strict=True):
            predictions.append(
                Prediction(
                    row=data.rows[i],
                    block=number,
                    prompt=questions[i],
                    expected=data.labels[i],
                    completion=label,
                    label=label,
                    extra={"fit": fitted.info},
                )
            )
    return predictions, {"few_shot_examples_dropped": 0, "queries_skipped": 0}


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


@register(NAME, needs=frozenset({GENERATE, FIT}))
def run_fewshot_predict(ctx: TestContext) -> TestResult:
    """Predict held-out rows from few-shot examples (or fit a baseline); score the accuracy."""
    p = ctx.params
    data = prediction_data(ctx.dataset)
    reason = not_applicable_reason(data, int(p.get("max_classes", 20)))
    if reason or data is None:
        return TestResult.not_applicable(NAME, reason or "no data")
    blocks = holdout_blocks(
        len(data.labels),
        int(p.get("n_test_rows", 500)),
        float(p.get("max_test_fraction", 0.2)),
        ctx.seed,
    )
    questions = _questions(data, IfThenFormat.from_params(p))
    system, style = system_prompt(ctx.dataset, data.target, p)
    baseline = baseline_of(ctx.model)
    if baseline is not None:
        predictions, counts = _baseline_predictions(baseline, data, blocks, questions, ctx.seed)
    else:
        predictions, counts = _llm_predictions(ctx, data, blocks, questions, system)
    if not predictions:
        return TestResult.not_applicable(
            NAME, "no test row's prompt fits the model's context window"
        )
    return _result(ctx, data, blocks, predictions, counts, system, style)


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
    alpha, min_effect = float(p.get("alpha", 0.01)), float(p.get("min_effect", 0.05))
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
        "n_shots": int(p.get("n_shots", 20)),
        "shot_sets": int(p.get("shot_sets", 0)),
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
            "prompt_form": "baseline" if baseline_of(ctx.model) else ctx.model.prompt_form,
            "target": data.target,
            "classes": data.classes,
        },
        records=_records(predictions),
        tables={"confusion.json": confusion_table(predictions, data.classes)},
    )
