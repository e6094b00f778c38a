"""The sampling kind of test: the model draws whole observations of the dataset from memory
(``sample``, ``feature_values``, ``feature_distribution``, ``conditional_distribution``).
Each query has its own few-shot draw and seed, so equal sampler settings give equal requests,
which the response cache answers once."""

from __future__ import annotations

import random
import re
from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, F, Lifecycle, Worded
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
from tabmem.results import QueryRecord, TestResult
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


def query_seed(seed: int, index: int) -> int:
    """The seed of query ``index`` of a run at ``seed``: its own for every pair, so runs at
    two seeds share no query. (``seed + index`` gave runs at seeds 0 and 1 all but one seed in
    common, and a model that reads a repeated question by its seed alone, as the reference
    models do, the same answers: 20 calibration seeds of the sample test were one draw.)"""
    return (seed * 1_000_003 + index) % 2**31


def _request(
    ctx: TestContext,
    settings: SampleSettings,
    pool: list[Dataset],
    index: int,
    max_tokens: int,
) -> tuple[Request | None, int]:
    """Query ``index``: its own few-shot draw and seed; None when it cannot fit the context."""
    seed = query_seed(ctx.seed, index)
    rng = random.Random(seed)
    template = settings.observation_prompt
    shots = rng.sample(pool, min(settings.few_shot, len(pool)))
    examples = [(_question(template, d), random_observation(d, rng)) for d in shots]
    question = _question(template, ctx.dataset)
    chat = ctx.model.prompt_form == "chat"
    params = GenerationParams(
        max_tokens=max_tokens,
        temperature=settings.temperature,
        stop=() if chat else ("\n",),
        seed=seed,
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
