"""Zero-knowledge sampling: the model draws whole observations of the dataset from memory.

Each query names the dataset and its features, after few-shot examples that are real
observations of *other* datasets only, and asks for one observation in ``Feature = Value`` form.
Every query draws its own few-shot examples and has its own seed, so repeated draws differ even
at temperature 0. The samples are compared with the real rows: how many are verbatim copies,
how many features each shares with its closest real row (beside the same for real rows against
the rest of the data), and how many of their values occur in the data.

How the samples are asked (``SamplingTest``) is shared with the other sampling tests:
``battery/sampling.py``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import stats

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import (
    Recorded,
    Rescorable,
    count_metrics,
    count_rule,
    register_lifecycle,
)
from tabmem.battery.sampling import (
    SampleDraw,
    SampleSettings,
    SamplingTest,
    metric_name,
    sampler_settings,
)
from tabmem.data import Dataset
from tabmem.results import TestResult, Verdict
from tabmem.stats.hits import CountRule, HitCount, decide_hits
from tabmem.stats.samples import (
    CodedTable,
    CopyNull,
    best_matches,
    data_values,
    known_value_share,
    real_row_best_matches,
)


@dataclass(frozen=True)
class SampleStatistics:
    """The papers' summary statistics of the samples against the real rows.

    Copies are counted over every query: an incomplete sample or a failed query copies nothing.
    The verdict rests on the distinct real rows copied against the most that a panel of
    data-only samplers writes among as many samples (``tabmem.stats.samples.CopyNull``).
    """

    n_queries: int
    n_complete: int
    copies: int
    distinct_copies: int
    distinct_expected: float
    strongest_sampler: str
    copy_chance: float
    copy_p_value: float
    best_match_samples: float
    best_match_real: float
    closeness_p_value: float
    known_values: float
    known_values_by_feature: dict[str, float]


@dataclass(frozen=True)
class _Reference:
    """What samples are compared with on a file and seed, whichever model wrote them: the
    coded data, the data-only samplers' chances of writing each real row, and real rows' best
    matches among the other rows."""

    table: CodedTable
    null: CopyNull
    real_best: np.ndarray


@lru_cache(maxsize=4)
def _reference(dataset: Dataset, seed: int, chance_draws: int, real_rows: int) -> _Reference:
    """The file's ``_Reference``, computed once for all the models asked on it with this seed
    (a ``Dataset`` is hashed by identity, and a loaded file is one object)."""
    rng = random.Random(seed)
    values = data_values(dataset)
    table = CodedTable.from_rows(values)
    null = CopyNull.fit(values, table, chance_draws, random.Random(f"null:{seed}"))
    picks = rng.sample(range(table.codes.shape[0]), min(real_rows, table.codes.shape[0]))
    return _Reference(table, null, real_row_best_matches(table, picks))


def sample_statistics(
    dataset: Dataset, draw: SampleDraw, seed: int, chance_draws: int, real_rows: int
) -> SampleStatistics:
    """Copies, best n-gram matches beside real rows', and values known to the data."""
    reference = _reference(dataset, seed, chance_draws, real_rows)
    table, null = reference.table, reference.null
    complete = draw.complete
    samples = np.array([table.encode([o.values[n] for n in draw.names]) for o in complete])
    samples = samples.reshape(len(complete), table.n_features)
    sample_best = best_matches(table, samples)
    copied = sample_best == table.n_features  # equal to a real row in every feature
    n_copies = int(copied.sum())
    n_distinct = len(np.unique(samples[copied], axis=0)) if n_copies else 0
    real_best = reference.real_best
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
    strongest, expected = null.expected(n_queries)
    return SampleStatistics(
        n_queries=n_queries,
        n_complete=len(complete),
        copies=n_copies,
        distinct_copies=n_distinct,
        distinct_expected=expected,
        strongest_sampler=strongest,
        copy_chance=null.copy_chance(),
        copy_p_value=null.p_value(n_distinct, n_queries),
        best_match_samples=float(sample_best.mean()) if len(sample_best) else 0.0,
        best_match_real=float(real_best.mean()) if len(real_best) else 0.0,
        closeness_p_value=closeness,
        known_values=known,
        known_values_by_feature={draw.names[j]: s for j, s in shares.items()},
    )


def distinct_count(s: SampleStatistics) -> HitCount:
    """The distinct real rows copied among the queries, against the strongest data-only
    sampler's expected share (its expected distinct rows over the queries)."""
    baseline = s.distinct_expected / s.n_queries if s.n_queries else 0.0
    return HitCount(s.distinct_copies, s.n_queries, min(1.0, baseline))


def _verdict(s: SampleStatistics, rule: CountRule) -> tuple[Verdict, str]:
    """Distinct rows copied by the count rule (``tabmem.stats.hits``), with the copy null's
    own p-value (``CopyNull.p_value``). Closeness is reported, not decided on: a model that
    draws near the data's modes (a low temperature, a sharp model of the distribution) lies
    closer to real rows than real rows lie to each other without having read one: the
    reference models that know the distribution and no row were ``ambiguous`` by it on 208
    of 1,008 negative cells (both query settings)."""
    if s.n_complete == 0:
        return Verdict.NO_EVIDENCE, "no sample named every feature, so none could be compared"
    decision = decide_hits("distinct real rows copied", distinct_count(s), rule, s.copy_p_value)
    reason = (
        f"{decision.reason} (the strongest data-only sampler: {s.strongest_sampler}, "
        f"{s.distinct_expected:.2f} distinct rows expected; {s.copies} samples copy a row)"
    )
    return decision.verdict, reason


@register_lifecycle
class Sample(SamplingTest[None], Rescorable[int, None]):
    """Draw observations, parse them, and compare them with the real rows. Recorded samples
    are scored from the samples alone: each line of a transcript is one sample, numbered by
    its line, and a line that names no feature is an invalid sample, as in a live run."""

    name = "sample"
    table_order = 8
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
        **count_metrics(distinct_count(s)),
        "copies": s.copies,
        "distinct_copies": s.distinct_copies,
        "distinct_copies_expected": s.distinct_expected,
        "copy_chance": s.copy_chance,
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
        n_hits=s.distinct_copies,
        rate=s.distinct_copies / s.n_queries if s.n_queries else 0.0,
        baseline=distinct_count(s).baseline,
        p_value=s.copy_p_value,
        metrics=metrics,
        info={
            "evidence_rule": (
                "distinct real rows copied significantly above the most that a data-only "
                "sampler writes among as many samples (independent marginal draws, and the "
                "data's Gaussian copulas at their own spread and sharper; Poisson p < "
                f"{p.alpha}), at least {p.min_hits} of them"
            ),
            "strongest_sampler": s.strongest_sampler,
            "temperature": draw.temperature,
            "invalid_samples": dict(draw.problems()),
            "few_shot_pool": draw.few_shot_pool,
            "prompt_form": ctx.prompt_form,
        },
        records=draw.records,
        tables={"samples.json": draw.table()},
    )
