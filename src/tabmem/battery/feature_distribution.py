"""Feature distribution: is each feature's most frequent sampled value the data's mode?

Observations are drawn at temperature 0 (``sampler`` settings, as in ``test=sample``); per
feature, the samples' most frequent value (or bin, for features with many numeric values) is
compared with the data's (see ``tabmem.stats.modes``). Knowing the typical value of each
feature is knowledge of the population the data describe, not memorization of its rows, and
not even knowledge of this file: world knowledge alone names adult's modes (``Race = White``,
``NativeCountry = United-States``), as a twin of the file or a model of its distribution does.
The baseline is a uniform pick among the data's values, so ``evidence`` says "knows the typical
values", nothing more.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pandas as pd

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import register_lifecycle
from tabmem.battery.sampling import SampleDraw, SamplingSettings, SamplingTest, metric_name
from tabmem.results import TestResult, Verdict
from tabmem.stats.modes import FeatureModes, compare_modes, poisson_binomial_tail
from tabmem.stats.samples import data_values
from tabmem.stats.verdicts import reaches


@dataclass(frozen=True)
class FeatureDistributionSettings(SamplingSettings):
    """``conf/test/feature_distribution.yaml``."""

    max_values: int
    n_bins: int
    alpha: float
    min_share: float


def mode_table(comparisons: list[FeatureModes]) -> pd.DataFrame:
    """Per compared feature: units, data modes, the samples' mode, agreement, chance."""
    return pd.DataFrame(
        [
            {
                "feature": c.name,
                "units": c.units,
                "data_modes": " | ".join(c.data_modes),
                "n_units": c.n_units,
                "sample_mode": c.sample_mode,
                "values_sampled": c.n_sampled,
                "agrees": c.agrees,
                "chance": c.chance,
            }
            for c in comparisons
        ],
        columns=[
            "feature",
            "units",
            "data_modes",
            "n_units",
            "sample_mode",
            "values_sampled",
            "agrees",
            "chance",
        ],
    )


def _verdict(
    agree: int, compared: int, p_value: float, alpha: float, min_share: float
) -> tuple[Verdict, str]:
    if compared == 0:
        return Verdict.NOT_APPLICABLE, "no feature has a mode to compare (all text or all ties)"
    share = agree / compared
    figures = f"{agree}/{compared} features agree with the data's mode (p={p_value:.2g})"
    significant, large = p_value < alpha, reaches(share, min_share)
    if significant and large:
        return Verdict.EVIDENCE, (
            f"{figures}: more than chance, and at least {min_share:.0%}: the model knows the "
            "typical values (the population's, which world knowledge may give: not the file's)"
        )
    if significant:
        return Verdict.AMBIGUOUS, f"{figures}: more than chance, but under {min_share:.0%}"
    if large:
        return Verdict.AMBIGUOUS, f"{figures}: not significant at {alpha:g}"
    return Verdict.NO_EVIDENCE, f"{figures}: no more than chance"


@register_lifecycle
class FeatureDistribution(SamplingTest[None]):
    """Draw observations at low temperature and compare each feature's mode with the data's."""

    name = "feature_distribution"
    table_order = 14
    claims = "knowledge"
    title = "feature distribution"
    settings = FeatureDistributionSettings

    def prepare(self, ctx: TestContext) -> None:
        return None

    def conclude(self, ctx: TestContext, facts: None, draw: SampleDraw) -> TestResult:
        return _result(ctx, draw)


def _result(ctx: TestContext, draw: SampleDraw) -> TestResult:
    """Each feature's sampled mode against the data's; the Poisson-binomial verdict."""
    p = ctx.params
    columns = list(zip(*data_values(ctx.dataset), strict=True))
    rng = random.Random(ctx.seed)
    comparisons = [
        c
        for name, column in zip(draw.names, columns, strict=True)
        if (
            c := compare_modes(
                name,
                column,
                draw.values_of(name),
                rng,
                p.max_values,
                p.n_bins,
            )
        )
        is not None
    ]
    agree = sum(c.agrees for c in comparisons)
    p_value = poisson_binomial_tail([c.chance for c in comparisons], agree)
    alpha, min_share = p.alpha, p.min_share
    verdict, reason = _verdict(agree, len(comparisons), p_value, alpha, min_share)
    chance = sum(c.chance for c in comparisons) / len(comparisons) if comparisons else None
    return TestResult(
        test="feature_distribution",
        verdict=verdict,
        reason=reason,
        n_queries=len(draw.records),
        n_hits=len(draw.complete),
        rate=agree / len(comparisons) if comparisons else None,
        baseline=chance,
        p_value=p_value if comparisons else None,
        metrics={
            **draw.counts(),
            "features_compared": len(comparisons),
            "features_agreeing": agree,
            **{metric_name("agrees", c.name): float(c.agrees) for c in comparisons},
        },
        info={
            "evidence_rule": (
                f"Poisson-binomial p < {alpha} against picking a unit uniformly, and at least "
                f"{min_share} of compared features agree"
            ),
            "features_not_compared": [
                n for n in draw.names if n not in {c.name for c in comparisons}
            ],
            "temperature": draw.temperature,
            "invalid_samples": dict(draw.problems()),
            "prompt_form": ctx.prompt_form,
        },
        records=draw.records,
        tables={"feature_modes.json": mode_table(comparisons), "samples.json": draw.table()},
    )
