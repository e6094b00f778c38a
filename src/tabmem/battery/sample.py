"""Zero-knowledge sampling: the model draws whole observations of the dataset from memory.

Each query names the dataset and its features, after few-shot examples that are real
observations of *other* datasets only, and asks for one observation in ``Feature = Value`` form.
Every query draws its own few-shot examples and has its own seed, so repeated draws differ even
at temperature 0. The samples are compared with the real rows: how many are verbatim copies,
how many features each shares with its closest real row (beside the same for real rows against
the rest of the data), and how many of their values occur in the data.

``SamplingTest`` is shared with ``feature_values``, ``feature_distribution`` and
``conditional_distribution``: equal settings give equal requests, which the response cache
answers once.
"""

from __future__ import annotations

import random
import re
from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import (
    Answer,
    F,
    Lifecycle,
    Recorded,
    Rescorable,
    Worded,
    count_metrics,
    count_rule,
    register_lifecycle,
)
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.llm.base import GenerationParams, Request
from tabmem.prompts.fewshot import chat_messages, fit_to_context
from tabmem.prompts.observations import (
    Observation,
    dataset_title,
    example_pool,
    feature_names,
    format_observation,
    parse_observation,
    random_observation,
    row_values,
)
from tabmem.results import QueryRecord, TestResult, Verdict
from tabmem.stats.hits import CountRule, HitCount, decide_hits
from tabmem.stats.samples import (
    CodedTable,
    best_matches,
    copied,
    copy_chance,
    data_values,
    joint_copy_chance,
    known_value_share,
    real_row_best_matches,
)
from tabmem.stats.scoring import strip_code_fence


@dataclass(frozen=True)
class SampleSettings(TestSettings):
    """``conf/test/sample.yaml``, also the ``sampler`` section of the other sampling tests."""

    n_samples: int
    temperature: float
    max_tokens: int | None
    alpha: float
    weak_alpha: float
    min_hits: int
    chance_draws: int
    real_rows: int
    few_shot: int
    few_shot_pool: list[str]
    system_prompt: str
    observation_prompt: str

    @property
    def sampler(self) -> SampleSettings:
        """The sampling settings: test=sample's own, as the other tests' ``sampler``."""
        return self


@dataclass(frozen=True)
class SamplingSettings(TestSettings):
    """A test that reads samples: its sampler's settings, then its own."""

    sampler: SampleSettings


_METRIC_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /]")


def metric_name(prefix: str, feature: str) -> str:
    """An MLflow-safe metric name for a per-feature figure."""
    return f"{prefix}.{_METRIC_UNSAFE.sub('_', feature)}"


@dataclass
class SampleDraw:
    """The observations one sampling run produced, with every query and its parse."""

    names: list[str]
    observations: list[Observation]
    records: list[QueryRecord]
    temperature: float
    few_shot_pool: list[str]
    dropped_examples: int
    skipped_prompts: int

    @property
    def complete(self) -> list[Observation]:
        return [o for o in self.observations if o.complete]

    def problems(self) -> Counter:
        """Why samples were incomplete (failed queries included), with counts."""
        reasons = Counter()
        for record, obs in zip(self.records, self.observations, strict=True):
            if record.error:
                reasons["query failed"] += 1
            elif not obs.values:
                reasons["no feature = value pairs"] += 1
            elif obs.missing:
                reasons["missing features"] += 1
        return reasons

    def values_of(self, name: str) -> list[str]:
        """Every value sampled for one feature, from complete and incomplete samples alike."""
        return [o.values[name] for o in self.observations if name in o.values]

    def table(self) -> pd.DataFrame:
        """One row per query: its index, whether the sample is complete, why not, its values."""
        rows = []
        for i, (record, obs) in enumerate(zip(self.records, self.observations, strict=True)):
            problem = "query failed" if record.error else obs.problem
            rows.append(
                {
                    "sample": i,
                    "complete": obs.complete and not record.error,
                    "problem": problem,
                    **{n: obs.values.get(n) for n in self.names},
                }
            )
        return pd.DataFrame(rows, columns=["sample", "complete", "problem", *self.names])

    def counts(self) -> dict[str, float]:
        """Requested, answered, complete and incomplete samples, for metrics."""
        failed = sum(1 for r in self.records if r.error)
        complete = len(self.complete)
        return {
            "samples_requested": len(self.records) + self.skipped_prompts,
            "samples_failed_queries": failed,
            "samples_complete": complete,
            "samples_invalid": len(self.records) - failed - complete,
            "few_shot_examples_dropped": self.dropped_examples,
            "prompts_skipped": self.skipped_prompts,
        }


def sampler_settings(ctx: TestContext) -> SampleSettings:
    """The sampling settings: the test's own (``test=sample``) or its ``sampler`` section."""
    return ctx.params.sampler


def _question(template: str, dataset: Dataset) -> str:
    return template.format(
        dataset=dataset_title(dataset), features=", ".join(feature_names(dataset))
    )


def _max_tokens(ctx: TestContext, settings: SampleSettings) -> int:
    """Room for one observation: twice the longest of the first rows, written as pairs."""
    if settings.max_tokens:
        return settings.max_tokens
    names = feature_names(ctx.dataset)
    rows = range(min(20, len(ctx.dataset.rows)))
    longest = max(
        ctx.model.count_tokens(format_observation(names, row_values(ctx.dataset, i))) for i in rows
    )
    return 2 * longest + 16


def _request(
    ctx: TestContext,
    settings: SampleSettings,
    pool: list[Dataset],
    index: int,
    max_tokens: int,
) -> tuple[Request | None, int]:
    """Query ``index``: its own few-shot draw and seed; None when it cannot fit the context."""
    rng = random.Random(ctx.seed * 1_000_003 + index)
    template = settings.observation_prompt
    shots = rng.sample(pool, min(settings.few_shot, len(pool)))
    examples = [(_question(template, d), random_observation(d, rng)) for d in shots]
    question = _question(template, ctx.dataset)
    chat = ctx.model.prompt_form == "chat"
    params = GenerationParams(
        max_tokens=max_tokens,
        temperature=settings.temperature,
        stop=() if chat else ("\n",),
        seed=ctx.seed + index,
    )

    def build(kept: int) -> Request:
        if chat:
            messages = chat_messages(settings.system_prompt, examples[:kept], question)
            return Request(params=params, messages=messages, sample_index=index)
        text = "".join(f"{q} {a}\n\n" for q, a in examples[:kept]) + question
        return Request(params=params, prompt=text, sample_index=index)

    fitted = fit_to_context(
        build, len(examples), ctx.model.count_tokens, ctx.model.context_window, params
    )
    return fitted.request, fitted.dropped_examples


def observation_of(text: str, error: str | None, names: list[str]) -> Observation:
    """The observation an answer writes; a failed query writes none."""
    return (
        Observation(missing=tuple(names))
        if error
        else parse_observation(strip_code_fence(text), names)
    )


class SamplingTest(Lifecycle[int, F]):
    """A test that reads observations the model draws (``sample``, ``feature_values``,
    ``feature_distribution``, ``conditional_distribution``): the queries are sample indices,
    each with its own few-shot draw and seed, so equal sampler settings give equal requests,
    which the response cache answers once. The decision gets the whole draw."""

    title = "sampling"

    @abstractmethod
    def prepare(self, ctx: TestContext) -> F | TestResult:
        """The data-only facts the decision needs, or why the test does not apply."""

    @abstractmethod
    def conclude(self, ctx: TestContext, facts: F, draw: SampleDraw) -> TestResult:
        """The draw as a result: statistic, baseline, verdict."""

    def plan(self, ctx: TestContext) -> tuple[list[int], F] | TestResult:
        facts = self.prepare(ctx)
        if isinstance(facts, TestResult):
            return facts
        return list(range(sampler_settings(ctx).n_samples)), facts

    def word(self, ctx: TestContext, queries: Sequence[int], facts: F) -> Worded[int]:
        settings = sampler_settings(ctx)
        pool = example_pool(ctx.dataset, settings.few_shot_pool)
        max_tokens = _max_tokens(ctx, settings)
        worded: Worded[int] = Worded([], [])
        dropped = skipped = 0
        for index in queries:
            request, lost = _request(ctx, settings, pool, index, max_tokens)
            if request is None:
                skipped += 1
                continue
            worded.queries.append(index)
            worded.requests.append(request)
            dropped += lost
        worded.context = {
            "few_shot_pool": [d.name for d in pool],
            "dropped_examples": dropped,
            "skipped_prompts": skipped,
        }
        return worded

    def score(self, ctx: TestContext, facts: F, answer: Answer[int]) -> QueryRecord:
        response = answer.response
        obs = observation_of(response.text, response.error, feature_names(ctx.dataset))
        return QueryRecord(
            prompt=answer.prompt,
            expected="",
            completion=response.text,
            score=float(obs.complete),
            error=response.error,
            extra={
                "sample_index": answer.query,
                "problem": "query failed" if response.error else obs.problem,
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: F,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        names = feature_names(ctx.dataset)
        draw = SampleDraw(
            names=names,
            observations=[observation_of(r.completion, r.error, names) for r in records],
            records=list(records),
            temperature=sampler_settings(ctx).temperature,
            few_shot_pool=list(context.get("few_shot_pool", [])),
            dropped_examples=int(context.get("dropped_examples", 0)),
            skipped_prompts=int(context.get("skipped_prompts", 0)),
        )
        return self.conclude(ctx, facts, draw)


@dataclass(frozen=True)
class SampleStatistics:
    """The papers' summary statistics of the samples against the real rows.

    Copies are counted over every query: an incomplete sample or a failed query copies nothing.
    """

    n_queries: int
    n_complete: int
    copies: int
    copy_chance: float
    copy_chance_marginal: float
    copy_chance_joint: float
    copy_p_value: float
    best_match_samples: float
    best_match_real: float
    closeness_p_value: float
    known_values: float
    known_values_by_feature: dict[str, float]


def sample_statistics(
    dataset: Dataset, draw: SampleDraw, seed: int, chance_draws: int, real_rows: int
) -> SampleStatistics:
    """Copies, best n-gram matches beside real rows', and values known to the data."""
    rng = random.Random(seed)
    values = data_values(dataset)
    table = CodedTable.from_rows(values)
    complete = draw.complete
    samples = np.array([table.encode([o.values[n] for n in draw.names]) for o in complete])
    samples = samples.reshape(len(complete), table.n_features)
    n_copies = int(copied(table, samples).sum())
    marginal = copy_chance(table, chance_draws, rng)
    joint = joint_copy_chance(values, table, chance_draws, random.Random(f"joint:{seed}"))
    sample_best = best_matches(table, samples)
    picks = rng.sample(range(table.codes.shape[0]), min(real_rows, table.codes.shape[0]))
    real_best = real_row_best_matches(table, picks)
    closeness = 1.0
    if len(sample_best) and len(real_best):
        closeness = float(stats.mannwhitneyu(sample_best, real_best, alternative="greater").pvalue)
    shares = known_value_share(table, {j: draw.values_of(n) for j, n in enumerate(draw.names)})
    all_values = [v for n in draw.names for v in draw.values_of(n)]
    known = (
        sum(shares[j] * len(draw.values_of(n)) for j, n in enumerate(draw.names) if j in shares)
        / len(all_values)
        if all_values
        else 0.0
    )
    n_queries = len(draw.records)
    return SampleStatistics(
        n_queries=n_queries,
        n_complete=len(complete),
        copies=n_copies,
        copy_chance=max(marginal, joint),
        copy_chance_marginal=marginal,
        copy_chance_joint=joint,
        copy_p_value=float(
            stats.binomtest(n_copies, n_queries, max(marginal, joint), "greater").pvalue
        )
        if n_queries
        else 1.0,
        best_match_samples=float(sample_best.mean()) if len(sample_best) else 0.0,
        best_match_real=float(real_best.mean()) if len(real_best) else 0.0,
        closeness_p_value=closeness,
        known_values=known,
        known_values_by_feature={draw.names[j]: s for j, s in shares.items()},
    )


def _verdict(s: SampleStatistics, rule: CountRule) -> tuple[Verdict, str]:
    """Copies by the count rule (``tabmem.stats.hits``); short of a signal there, samples
    closer to real rows than real rows are to each other are ``ambiguous``."""
    if s.n_complete == 0:
        return Verdict.NO_EVIDENCE, "no sample named every feature, so none could be compared"
    count = HitCount(s.copies, s.n_queries, s.copy_chance)
    decision = decide_hits("samples that copy a real row", count, rule, s.copy_p_value)
    if decision.verdict == Verdict.NO_EVIDENCE and s.closeness_p_value < rule.alpha:
        return Verdict.AMBIGUOUS, (
            f"{decision.reason}; yet samples share more features with their closest real row "
            f"({s.best_match_samples:.2f}) than real rows do ({s.best_match_real:.2f}, "
            f"p={s.closeness_p_value:.2g})"
        )
    return decision.verdict, decision.reason


@register_lifecycle
class Sample(SamplingTest[None], Rescorable[int, None]):
    """Draw observations, parse them, and compare them with the real rows. Recorded samples
    are scored from the samples alone: each line of a transcript is one sample, numbered by
    its line, and a line that names no feature is an invalid sample, as in a live run."""

    name = "sample"
    claims = "rows_seen"
    title = "sample"
    settings = SampleSettings

    def pick(self, ctx: TestContext) -> list[int]:
        return list(range(sampler_settings(ctx).n_samples))

    def prepare(self, ctx: TestContext, queries: Sequence[int] = ()) -> None:
        return None

    def locate(self, ctx: TestContext, recorded: Recorded) -> int:
        return recorded.line

    def settings_for(self, recorded: Sequence[Recorded]) -> dict[str, Any]:
        """A transcript holds its own number of samples."""
        return {"n_samples": len(recorded)}

    def conclude(self, ctx: TestContext, facts: None, draw: SampleDraw) -> TestResult:
        return _sample_result(ctx, draw)


def _sample_result(ctx: TestContext, draw: SampleDraw) -> TestResult:
    """Copies, closeness and known values of the samples against the real rows; the verdict."""
    p = ctx.params
    s = sample_statistics(
        ctx.dataset,
        draw,
        ctx.seed,
        p.chance_draws,
        p.real_rows,
    )
    verdict, reason = _verdict(s, count_rule(p))
    metrics = {
        **draw.counts(),
        **count_metrics(HitCount(s.copies, s.n_queries, s.copy_chance)),
        "copies": s.copies,
        "copy_chance": s.copy_chance,
        "copy_chance_marginal": s.copy_chance_marginal,
        "copy_chance_joint": s.copy_chance_joint,
        "copy_p_value": s.copy_p_value,
        "best_match_samples": s.best_match_samples,
        "best_match_real_rows": s.best_match_real,
        "closeness_p_value": s.closeness_p_value,
        "known_value_share": s.known_values,
        **{metric_name("known_values", k): v for k, v in s.known_values_by_feature.items()},
    }
    return TestResult(
        test="sample",
        verdict=verdict,
        reason=reason,
        n_queries=len(draw.records),
        n_hits=s.copies,
        rate=s.copies / s.n_queries if s.n_queries else 0.0,
        baseline=s.copy_chance,
        p_value=s.copy_p_value,
        metrics=metrics,
        info={
            "evidence_rule": (
                "copies of real rows significantly above the chance copies of a model without "
                "the rows (the better of independent marginal draws and draws from the data's "
                f"Gaussian copulas; binomial p < {p.alpha}), at least {p.min_hits} of them"
            ),
            "temperature": draw.temperature,
            "invalid_samples": dict(draw.problems()),
            "few_shot_pool": draw.few_shot_pool,
            "prompt_form": ctx.prompt_form,
        },
        records=draw.records,
        tables={"samples.json": draw.table()},
    )
