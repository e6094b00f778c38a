"""What the two multiple-choice probes (Silvestri et al. 2025) share: the prompt's wording, the
options in random order, asking, reading the letters back, the statistics and the verdict.

The probes are ``completion_choice`` and ``existence``: each is a ``ChoiceProbe`` that draws its
``ChoiceQuestion`` list; the rest of the lifecycle is shared.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, Lifecycle, Worded, count_metrics, count_rule
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.transforms import KEEP_IDENTITY, transform_name
from tabmem.llm.base import Request
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
from tabmem.prompts.probe_records import ValueTable
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.best_of import CHANCE, MODE, NEIGHBOURS, BestOf, choice_chances
from tabmem.stats.hits import HitCount, unreachable_reason
from tabmem.stats.probes import (
    ChoiceSummary,
    attribute_pool,
    choice_verdict,
    frequency_rule_hit,
)
from tabmem.stats.pvalues import binomial_greater

FAILED = "failed"
"""The ``parse_rule`` of a query whose provider gave up: a miss, not counted as unparseable."""


@dataclass(frozen=True)
class ChoiceQuestion:
    """One question: the user text (options included), the options, the right one, and each
    option's score under the frequency rule (``tabmem.stats.probes``) and under each
    data-only rule (``ValuePredictors.choice_scores``: nearest neighbours, the copula, the
    boosted models, each without the asked record)."""

    text: str
    options: tuple[Option, ...]
    correct: int
    frequency_scores: tuple[float, ...]
    rule_scores: dict[str, tuple[float, ...]]
    extra: dict[str, Any] = field(default_factory=dict)

    def chances(self, n_options: int) -> dict[str, float]:
        """Each data-only rule's chance of picking the right option, and chance itself: the
        question's baseline is the best of them (``tabmem.stats.best_of``)."""
        scores = {MODE: self.frequency_scores, **self.rule_scores}
        return {**choice_chances(scores, self.correct), CHANCE: 1.0 / n_options}


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

    def question(
        self, text: str, rules: Mapping[str, Sequence[float]], extra: dict[str, Any]
    ) -> ChoiceQuestion:
        """The question these options make, with each data-only rule's scores (given in the
        original order) in the shuffled one."""
        shuffled = {name: self.reorder(scores) for name, scores in rules.items()}
        return ChoiceQuestion(text, self.options, self.correct, self.scores, shuffled, extra)


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


@dataclass(frozen=True)
class ChoiceSettings(TestSettings):
    """What both multiple-choice probes read from their config."""

    n_queries: int
    pool_fraction: float
    n_options: int
    alpha: float
    weak_alpha: float
    min_hits: int
    max_tokens: int
    named: str
    unnamed: str
    system_prompt: str
    answer_cue: str
    question: str


def source_phrase(dataset: Dataset, params: ChoiceSettings) -> str:
    """How the prompt names the data: by its best-known name on transforms that keep the
    dataset's identity (``original``, ``like``), anonymously on the others (``obfuscated``)."""
    if transform_name(dataset) in KEEP_IDENTITY:
        return params.named.format(dataset=dataset_title(dataset))
    return params.unnamed


def _request(ctx: TestContext, question: ChoiceQuestion) -> Request | None:
    p = ctx.params
    model = ctx.model_for("Wording")
    chat = model.prompt_form == "chat"
    params = ctx.greedy_answer(p.max_tokens)
    system, cue = p.system_prompt, p.answer_cue

    def build(_: int) -> Request:
        return choice_request(system, question.text, chat, cue, params)

    return fit_to_context(build, 0, model.count_tokens, model.context_window, params).request


@dataclass(frozen=True)
class ProbeFacts:
    """What the decision reports besides the answers: how the questions were drawn
    (``metrics``) and which attributes could be asked (``info``)."""

    metrics: dict[str, float]
    info: dict[str, Any]


class ChoiceProbe(Lifecycle[ChoiceQuestion, ProbeFacts]):
    """A multiple-choice probe: draw questions from the file, ask them, read the letters back,
    and compare the accuracy with each question's data-only baseline."""

    nothing_fits = "no question fits the model's context window"
    none_drawn: ClassVar[str]  # why no question could be drawn
    fraction_key: ClassVar[str]  # the setting for the share of attributes hidden or changed
    figure_names: ClassVar[tuple[str, str]]  # metrics: attributes per record, draws dropped
    draw: ClassVar[Callable[..., tuple[list[ChoiceQuestion], int]]]
    """(table, params, pool, n_changed, source, rng) -> the questions and the draws dropped"""

    def questions(
        self, ctx: TestContext, table: ValueTable, pool: list[int], n_changed: int
    ) -> tuple[list[ChoiceQuestion], dict[str, float]]:
        """The questions, seeded by the test's name and the seed, and figures of the draw."""
        rng = random.Random(f"{self.name}:{ctx.seed}")
        source = source_phrase(ctx.dataset, ctx.params)
        drawn, dropped = type(self).draw(table, ctx.params, pool, n_changed, source, rng)
        per_record, dropped_name = self.figure_names
        return drawn, {per_record: n_changed, dropped_name: dropped}

    def plan(self, ctx: TestContext) -> tuple[list[ChoiceQuestion], ProbeFacts] | TestResult:
        p = ctx.params
        table = ValueTable.from_dataset(ctx.dataset)
        n_options = p.n_options
        n_changed = hidden_count(len(table.names), getattr(p, self.fraction_key))
        pool = attribute_pool(table.columns, n_changed, n_options, p.pool_fraction)
        info: dict[str, Any] = {"attribute_pool": [table.names[j] for j in pool]}
        if not pool or len(table.rows) < n_options:
            reason = f"no attribute has {n_options} distinct values over {n_options} rows"
            return TestResult.not_applicable(self.name, reason, info=info)
        questions, metrics = self.questions(ctx, table, pool, n_changed)
        if not questions:
            return TestResult.not_applicable(self.name, self.none_drawn, info=info)
        baseline = BestOf.of([q.chances(n_options) for q in questions]).rate
        cannot = unreachable_reason(len(questions), baseline, count_rule(p), "the right option")
        if cannot:
            return TestResult.not_applicable(self.name, cannot, info=info)
        return questions, ProbeFacts(metrics, info)

    def word(
        self, ctx: TestContext, queries: Sequence[ChoiceQuestion], facts: ProbeFacts
    ) -> Worded[ChoiceQuestion]:
        asked = [(r, q) for q in queries if (r := _request(ctx, q)) is not None]
        return Worded(
            [q for _, q in asked],
            [r for r, _ in asked],
            {"queries_skipped_context": len(queries) - len(asked)},
        )

    def unfit(
        self, ctx: TestContext, facts: ProbeFacts, worded: Worded[ChoiceQuestion]
    ) -> TestResult:
        return TestResult.not_applicable(self.name, self.nothing_fits, info=facts.info)

    def score(
        self, ctx: TestContext, facts: ProbeFacts, answer: Answer[ChoiceQuestion]
    ) -> QueryRecord:
        question, response = answer.query, answer.response
        if response.error:
            choice = Choice(None, FAILED)
        else:
            choice = parse_choice(response.text or "", question.options)
        hit = choice.index == question.correct
        picked = LETTERS[choice.index] if choice.index is not None else ""
        return QueryRecord(
            prompt=answer.prompt,
            expected=LETTERS[question.correct],
            completion=response.text or "",
            score=float(hit),
            error=response.error,
            extra={
                **question.extra,
                "picked": picked,
                "parse_rule": choice.rule,
                "options": [o.text for o in question.options],
                "frequency_rule_hit": frequency_rule_hit(
                    question.frequency_scores, question.correct
                ),
                "rule_hit": frequency_rule_hit(question.rule_scores[NEIGHBOURS], question.correct),
                "baseline_chances": question.chances(len(question.options)),
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: ProbeFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        return _result(
            ctx,
            self.name,
            list(records),
            int(context.get("queries_skipped_context", 0)),
            facts.metrics,
            facts.info,
        )


def hidden_count(n_attributes: int, fraction: float) -> int:
    """How many attributes of a record to hide: ``fraction`` of them, rounded, one at least."""
    return max(1, round(fraction * n_attributes))


def _result(
    ctx: TestContext,
    test: str,
    records: list[QueryRecord],
    skipped: int,
    metrics: Mapping[str, float],
    info: Mapping[str, Any],
) -> TestResult:
    p = ctx.params
    n_options = p.n_options
    hits = sum(int(r.score) for r in records)
    summary = ChoiceSummary(hits, len(records), n_options)
    data_rule_rate = sum(r.extra["rule_hit"] for r in records) / summary.n
    best = BestOf.of([r.extra["baseline_chances"] for r in records])
    count = HitCount(hits, summary.n, best.rate)
    verdict, reason = choice_verdict(summary, count, count_rule(p))
    reason = f"{reason} (baseline: {best.sentence()})"
    picked = Counter(r.extra["picked"] for r in records if r.extra["picked"])
    parsed = sum(picked.values())
    rules = Counter(r.extra["parse_rule"] for r in records)
    rule_rate = sum(r.extra["frequency_rule_hit"] for r in records) / summary.n
    return TestResult(
        test=test,
        verdict=verdict,
        reason=reason,
        n_queries=summary.n,
        n_hits=hits,
        rate=summary.rate,
        baseline=count.baseline,
        p_value=count.p_value,
        metrics={
            **metrics,
            "n_options": n_options,
            "n_unparseable": rules[UNPARSEABLE],
            "rate_parsed": hits / parsed if parsed else 0.0,
            **count_metrics(count),
            "frequency_rule_rate": rule_rate,
            "frequency_rule_p_value": binomial_greater(hits, summary.n, rule_rate),
            "data_rule_rate": data_rule_rate,
            **best.metrics(),
            "chance_p_value": summary.p_value,
            "top_letter_share": max(picked.values()) / parsed if parsed else 0.0,
            "queries_skipped_context": skipped,
        },
        info={
            **info,
            "evidence_rule": (
                f"accuracy above the baseline — the best of chance 1/{n_options} and each "
                "data-only rule's mean chance (frequencies, a nearest-neighbour model and the "
                "Gaussian copula of the file, each without the asked record) to pick the right "
                "option over the questions — with an exact binomial "
                f"p < {p.alpha:g} from at least {p.min_hits} right answers"
            ),
            "baseline_set_by": best.leader(),
            "prompt_form": ctx.prompt_form,
            "parse_rules": dict(rules),
        },
        records=records,
    )
