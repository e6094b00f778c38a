"""Feature values: do the model's sampled values have the format of the file's values?

Observations are drawn at temperature 0 (``sampler`` settings, as in ``test=sample``); every
value sampled for a feature is checked against that feature's format in the file (type,
decimals, category spelling, text shape; see ``tabmem.stats.formats``). Knowing the legal
values and how they are written is knowledge of the dataset, not memorization of its rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from scipy import stats

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import register_lifecycle
from tabmem.battery.sampling import SampleDraw, SamplingSettings, SamplingTest, metric_name
from tabmem.prompts.observations import feature_names
from tabmem.results import TestResult, Verdict
from tabmem.stats.formats import FeatureFormat, feature_format
from tabmem.stats.samples import data_values


@dataclass(frozen=True)
class FeatureValuesSettings(SamplingSettings):
    """``conf/test/feature_values.yaml``."""

    max_categories: int
    evidence_rate: float
    ambiguous_rate: float


def feature_formats(ctx: TestContext, max_categories: int) -> list[FeatureFormat]:
    """Each feature's format, read from the file."""
    columns = list(zip(*data_values(ctx.dataset), strict=True))
    return [
        feature_format(name, column, max_categories)
        for name, column in zip(feature_names(ctx.dataset), columns, strict=True)
    ]


def format_table(draw: SampleDraw, formats: list[FeatureFormat]) -> pd.DataFrame:
    """Per feature: its format, how many values were sampled, and how many have the format."""
    rows = []
    for fmt in formats:
        sampled = draw.values_of(fmt.name)
        matching = sum(fmt.matches(v) for v in sampled)
        rows.append(
            {
                "feature": fmt.name,
                "kind": fmt.kind,
                "format": fmt.describe(),
                "sampled": len(sampled),
                "matching": matching,
                "rate": matching / len(sampled) if sampled else 0.0,
                "examples_not_matching": " | ".join([v for v in sampled if not fmt.matches(v)][:5]),
            }
        )
    return pd.DataFrame(rows)


def samples_in_format(draw: SampleDraw, formats: list[FeatureFormat]) -> int:
    """Complete samples whose every value has its feature's format."""
    return sum(all(fmt.matches(obs.values[fmt.name]) for fmt in formats) for obs in draw.complete)


def _verdict(
    rate: float, low: float, n_values: int, evidence_rate: float, ambiguous_rate: float
) -> tuple[Verdict, str]:
    if n_values == 0:
        return Verdict.NO_EVIDENCE, "no sampled value could be read, so none could be checked"
    figures = (
        f"{rate:.0%} of {n_values} sampled values have the file's format (95% CI from {low:.0%})"
    )
    if low >= evidence_rate:
        return Verdict.EVIDENCE, f"{figures}; the lower bound reaches {evidence_rate:.0%}"
    if rate >= ambiguous_rate:
        return Verdict.AMBIGUOUS, f"{figures}; the lower bound is under {evidence_rate:.0%}"
    return Verdict.NO_EVIDENCE, f"{figures}, under {ambiguous_rate:.0%}"


@register_lifecycle
class FeatureValues(SamplingTest[list[FeatureFormat]]):
    """Draw observations at low temperature and check each value's format."""

    name = "feature_values"
    table_order = 13
    claims = "knowledge"
    title = "feature values"
    settings = FeatureValuesSettings

    def prepare(self, ctx: TestContext) -> list[FeatureFormat]:
        return feature_formats(ctx, ctx.params.max_categories)

    def conclude(
        self, ctx: TestContext, facts: list[FeatureFormat], draw: SampleDraw
    ) -> TestResult:
        return _result(ctx, draw, facts)


def _result(ctx: TestContext, draw: SampleDraw, formats: list[FeatureFormat]) -> TestResult:
    """The share of sampled values in the file's format, its interval, and the verdict."""
    p = ctx.params
    table = format_table(draw, formats)
    n_values, matching = int(table["sampled"].sum()), int(table["matching"].sum())
    rate = matching / n_values if n_values else 0.0
    interval = (
        stats.binomtest(matching, n_values).proportion_ci(0.95, method="wilson")
        if n_values
        else None
    )
    low, high = (float(interval.low), float(interval.high)) if interval else (0.0, 1.0)
    evidence_rate = p.evidence_rate
    verdict, reason = _verdict(rate, low, n_values, evidence_rate, p.ambiguous_rate)
    per_feature = {
        metric_name("format_rate", r.feature): float(r.rate)
        for r in table.itertuples()
        if r.sampled
    }
    return TestResult(
        test="feature_values",
        verdict=verdict,
        reason=reason,
        n_queries=len(draw.records),
        n_hits=samples_in_format(draw, formats),
        rate=rate,
        metrics={
            **draw.counts(),
            "values_sampled": n_values,
            "values_in_format": matching,
            "rate_ci_low": low,
            "rate_ci_high": high,
            "features_all_in_format": int(((table.rate == 1.0) & (table.sampled > 0)).sum()),
            **per_feature,
        },
        info={
            "evidence_rule": (
                f"lower end of the 95% Wilson interval of the share of sampled values in the "
                f"file's format >= {evidence_rate}"
            ),
            "temperature": draw.temperature,
            "invalid_samples": dict(draw.problems()),
            "prompt_form": ctx.prompt_form,
        },
        records=draw.records,
        tables={"feature_formats.json": table, "samples.json": draw.table()},
    )
