"""What the two multiple-choice probes (Silvestri et al. 2025) share: the prompt's wording, the
options in random order, asking, reading the letters back, the statistics and the verdict.

The probes are ``completion_choice`` and ``existence``; each builds its ``ChoiceQuestion`` list
and hands it to ``ask_and_score``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.data import Dataset
from tabmem.data.transforms import KEEP_IDENTITY, transform_name
from tabmem.llm.base import GenerationParams, Request
from tabmem.prompts.choices import (
    LETTERS,
    UNPARSEABLE,
    Choice,
    Option,
    choice_request,
    parse_choice,
)
from tabmem.prompts.fewshot import fit_to_context
from tabmem.prompts.observations import dataset_title
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.paired import against_baseline, unreachable_reason
from tabmem.stats.probes import (
    ChoiceSummary,
    choice_verdict,
    frequency_rule_hit,
    question_baseline,
)
from tabmem.stats.pvalues import binomial_greater

FAILED = "failed"
"""The ``parse_rule`` of a query whose provider gave up: a miss, not counted as unparseable."""


@dataclass(frozen=True)
class ChoiceQuestion:
    """One question: the user text (options included), the options, the right one, and each
    option's score under the frequency rule (``tabmem.stats.probes``) and under the data-only
    rule (a nearest-neighbour model of the file without the asked record)."""

    text: str
    options: tuple[Option, ...]
    correct: int
    frequency_scores: tuple[float, ...]
    rule_scores: tuple[float, ...]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Shuffled:
    """Options in a random order, with where the right one and each score went."""

    options: tuple[Option, ...]
    correct: int
    scores: tuple[float, ...]
    order: tuple[int, ...]

    def reorder(self, values: Sequence[float]) -> tuple[float, ...]:
        """Per-option figures given in the original order, in the shuffled one."""
        return tuple(values[i] for i in self.order)


def shuffle_options(
    options: Sequence[Option], scores: Sequence[float], rng: random.Random
) -> Shuffled:
    """``options`` (the right one first) in a random order; the right letter is uniform."""
    order = list(range(len(options)))
    rng.shuffle(order)
    return Shuffled(
        tuple(options[i] for i in order),
        order.index(0),
        tuple(scores[i] for i in order),
        tuple(order),
    )


def source_phrase(dataset: Dataset, params: Mapping[str, Any]) -> str:
    """How the prompt names the data: by its best-known name on transforms that keep the
    dataset's identity (``original``, ``like``), anonymously on the others (``obfuscated``)."""
    if transform_name(dataset) in KEEP_IDENTITY:
        return str(params.get("named", "the {dataset} dataset")).format(
            dataset=dataset_title(dataset)
        )
    return str(params.get("unnamed", "a tabular dataset"))


def _request(ctx: TestContext, question: ChoiceQuestion) -> Request | None:
    p = ctx.params
    chat = ctx.model.prompt_form == "chat"
    params = GenerationParams(
        max_tokens=int(p.get("max_tokens", 24)),
        temperature=0.0,
        stop=() if chat else ("\n",),
        seed=ctx.seed,
    )
    system, cue = str(p.get("system_prompt", "")), str(p.get("answer_cue", "Answer:"))

    def build(_: int) -> Request:
        return choice_request(system, question.text, chat, cue, params)

    fitted = fit_to_context(build, 0, ctx.model.count_tokens, ctx.model.context_window, params)
    return fitted.request


def _record(request: Request, question: ChoiceQuestion, response: Any) -> QueryRecord:
    if response.error:
        choice = Choice(None, FAILED)
    else:
        choice = parse_choice(response.text or "", question.options)
    hit = choice.index == question.correct
    picked = LETTERS[choice.index] if choice.index is not None else ""
    return QueryRecord(
        prompt=request.as_text(),
        expected=LETTERS[question.correct],
        completion=response.text or "",
        score=float(hit),
        error=response.error,
        extra={
            **question.extra,
            "picked": picked,
            "parse_rule": choice.rule,
            "options": [o.text for o in question.options],
            "frequency_rule_hit": frequency_rule_hit(question.frequency_scores, question.correct),
            "rule_hit": frequency_rule_hit(question.rule_scores, question.correct),
        },
    )


def ask_and_score(
    ctx: TestContext,
    test: str,
    questions: Sequence[ChoiceQuestion],
    metrics: Mapping[str, float],
    info: Mapping[str, Any],
) -> TestResult:
    """Ask every question that fits the context window, read the letters, decide the verdict."""
    p = ctx.params
    n_options = int(p.get("n_options", 5))
    baselines = [question_baseline(q.rule_scores, q.correct, n_options) for q in questions]
    alpha, min_effect = float(p.get("alpha", 0.001)), float(p.get("min_effect", 0.1))
    cannot = unreachable_reason(baselines, alpha, min_effect, "the right option")
    if cannot:
        return TestResult.not_applicable(test, cannot, info=info)
    asked = [(r, q) for q in questions if (r := _request(ctx, q)) is not None]
    if not asked:
        return TestResult.not_applicable(
            test, "no question fits the model's context window", info=info
        )
    requests = [r for r, _ in asked]
    responses = ctx.model.run(requests, description=f"{test} probe on {ctx.dataset.name}")
    records = [_record(r, q, response) for (r, q), response in zip(asked, responses, strict=True)]
    return _result(ctx, test, records, len(questions) - len(asked), metrics, info)


def _result(
    ctx: TestContext,
    test: str,
    records: list[QueryRecord],
    skipped: int,
    metrics: Mapping[str, float],
    info: Mapping[str, Any],
) -> TestResult:
    p = ctx.params
    n_options = int(p.get("n_options", 5))
    alpha, min_effect = float(p.get("alpha", 0.001)), float(p.get("min_effect", 0.1))
    hits = sum(int(r.score) for r in records)
    summary = ChoiceSummary(hits, len(records), n_options)
    baselines = [max(summary.chance, r.extra["rule_hit"]) for r in records]  # = question_baseline
    against = against_baseline([r.score for r in records], baselines)
    verdict, reason = choice_verdict(summary, against, alpha, min_effect)
    picked = Counter(r.extra["picked"] for r in records if r.extra["picked"])
    parsed = sum(picked.values())
    low, high = summary.interval
    rules = Counter(r.extra["parse_rule"] for r in records)
    rule_rate = sum(r.extra["frequency_rule_hit"] for r in records) / summary.n
    data_rule_rate = sum(r.extra["rule_hit"] for r in records) / summary.n
    return TestResult(
        test=test,
        verdict=verdict,
        reason=reason,
        n_queries=summary.n,
        n_hits=hits,
        rate=summary.rate,
        baseline=against.baseline,
        p_value=against.p_value,
        metrics={
            **metrics,
            "n_options": n_options,
            "n_unparseable": rules[UNPARSEABLE],
            "rate_parsed": hits / parsed if parsed else 0.0,
            "rate_ci_low": low,
            "rate_ci_high": high,
            "frequency_rule_rate": rule_rate,
            "frequency_rule_p_value": binomial_greater(hits, summary.n, rule_rate),
            "data_rule_rate": data_rule_rate,
            "chance_p_value": summary.p_value,
            "top_letter_share": max(picked.values()) / parsed if parsed else 0.0,
            "queries_skipped_context": skipped,
        },
        info={
            **info,
            "evidence_rule": (
                f"accuracy above each question's baseline — the better of chance 1/{n_options} "
                "and the answer of a nearest-neighbour model of the file without the asked "
                f"record — by >= {min_effect:g}, exact p < {alpha:g} (Poisson-binomial over the "
                "per-question baselines)"
            ),
            "prompt_form": ctx.model.prompt_form,
            "parse_rules": dict(rules),
        },
        records=records,
    )
