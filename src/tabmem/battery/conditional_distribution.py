"""Conditional distribution: do the samples show the data's correlations between features?

Observations are drawn as in ``test=sample`` (same settings, so the cache answers them once);
the Pearson correlations between the numeric features of the complete samples are compared
with the data's (``tabmem.stats.correlation``): their slope ("recovery"), the correlation of
the two matrices, the share of clear correlations whose sign the samples keep, and a
permutation p-value against a model that draws each feature independently. A model that knows
only each feature's distribution cannot pass; one that learned how features go together can.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import register_lifecycle
from tabmem.battery.sampling import SampleDraw, SamplingSettings, SamplingTest
from tabmem.results import TestResult, Verdict
from tabmem.stats.correlation import CorrelationComparison, compare_correlations, numeric_columns
from tabmem.stats.verdicts import reaches


@dataclass(frozen=True)
class ConditionalDistributionSettings(SamplingSettings):
    """``conf/test/conditional_distribution.yaml``."""

    strong_correlation: float
    min_samples: int
    permutations: int
    alpha: float
    min_recovery: float


def heat_map(data: pd.DataFrame, samples: pd.DataFrame, n_samples: int, title: str) -> Figure:
    """The data's and the samples' correlation matrices side by side, on one colour scale
    (a correlation the samples cannot define is left blank)."""
    size = max(4.0, 0.45 * len(data) + 2.5)
    figure = Figure(figsize=(2 * size + 1.5, size), layout="constrained")
    axes = figure.subplots(1, 2)
    panels = [("data", data), (f"samples (n={n_samples})", samples)]
    image = None
    for ax, (label, matrix) in zip(axes, panels, strict=True):
        values = matrix.to_numpy(dtype=float)
        image = ax.imshow(values, vmin=-1, vmax=1, cmap="RdBu_r")
        if len(values) <= 12:
            for (i, j), r in np.ndenumerate(values):
                text = "" if np.isnan(r) else f"{r:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7)
        ticks = range(len(matrix))
        ax.set_xticks(ticks, matrix.columns, rotation=90, fontsize=8)
        ax.set_yticks(ticks, matrix.index, fontsize=8)
        ax.set_title(label)
    figure.colorbar(image, ax=list(axes), shrink=0.8, label="Pearson r")
    figure.suptitle(title)
    return figure


def sample_frame(draw: SampleDraw, columns: list[str]) -> pd.DataFrame:
    """The complete samples' numeric features as floats (unreadable numbers as missing)."""
    rows = [{c: o.values[c] for c in columns} for o in draw.complete]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.apply(pd.to_numeric, errors="coerce")


def _too_few_samples(reason: str, draw: SampleDraw, figure: Figure) -> TestResult:
    """The model gave too few usable samples to compare: no evidence, the heat map still drawn."""
    return TestResult(
        test="conditional_distribution",
        verdict=Verdict.NO_EVIDENCE,
        reason=reason,
        n_queries=len(draw.records),
        n_hits=len(draw.complete),
        metrics=draw.counts(),
        info={"invalid_samples": dict(draw.problems()), "temperature": draw.temperature},
        records=draw.records,
        tables={"samples.json": draw.table()},
        figures={"correlations.png": figure},
    )


def _verdict(c: CorrelationComparison, alpha: float, min_recovery: float) -> tuple[Verdict, str]:
    figures = (
        f"the samples recover {c.recovery:.2f} of the data's correlations "
        f"(permutation p={c.p_value:.2g}, n={c.n_samples})"
    )
    significant, large = c.p_value < alpha, reaches(c.recovery, min_recovery)
    if significant and large:
        return Verdict.EVIDENCE, f"{figures}: the model knows how features go together"
    if significant:
        return Verdict.AMBIGUOUS, f"{figures}: dependent, but under {min_recovery:g} recovered"
    if large:
        return Verdict.AMBIGUOUS, f"{figures}: large but not significant at {alpha:g}"
    return Verdict.NO_EVIDENCE, f"{figures}: no more than independent draws"


@dataclass(frozen=True)
class NumericData:
    """The file's numeric features as floats, and the threshold of a clear correlation."""

    columns: list[str]
    data: pd.DataFrame
    strong: float


@register_lifecycle
class ConditionalDistribution(SamplingTest[NumericData]):
    """Draw observations and compare their correlation matrix with the data's."""

    name = "conditional_distribution"
    table_order = 15
    claims = "knowledge"
    title = "conditional distribution"
    settings = ConditionalDistributionSettings

    def prepare(self, ctx: TestContext) -> NumericData | TestResult:
        frame = ctx.dataset.frame
        columns = numeric_columns(frame)
        strong = ctx.params.strong_correlation
        if len(columns) < 2:
            return TestResult.not_applicable(
                self.name, f"the data has {len(columns)} numeric feature(s); 2 are needed"
            )
        data = frame[columns].astype(float)
        data_r = data.corr().to_numpy()
        off_diagonal = np.abs(data_r[np.triu_indices(len(columns), k=1)])
        if np.nanmax(off_diagonal) < strong:
            return TestResult.not_applicable(
                self.name,
                f"no two numeric features correlate by |r| >= {strong} in the data "
                f"(largest {np.nanmax(off_diagonal):.2f})",
            )
        return NumericData(columns, data, strong)

    def conclude(self, ctx: TestContext, facts: NumericData, draw: SampleDraw) -> TestResult:
        return _result(ctx, facts, draw)


def _result(ctx: TestContext, numeric: NumericData, draw: SampleDraw) -> TestResult:
    """The samples' correlations against the data's: recovery, permutation p-value, verdict."""
    p = ctx.params
    columns, data = numeric.columns, numeric.data
    samples = sample_frame(draw, columns)
    model = ctx.model.name if ctx.model is not None else "transcript"
    title = f"{model} on {ctx.dataset.name}: Pearson correlations"
    min_samples = p.min_samples
    if len(samples.dropna()) < min_samples:
        figure = heat_map(data.corr(), samples.corr(), len(samples), title)
        return _too_few_samples(
            f"{len(samples.dropna())} samples have every numeric feature as a number; "
            f"{min_samples} are needed",
            draw,
            figure,
        )
    comparison = compare_correlations(
        data, samples, random.Random(ctx.seed), p.permutations, numeric.strong
    )
    alpha, min_recovery = p.alpha, p.min_recovery
    verdict, reason = _verdict(comparison, alpha, min_recovery)
    pairs = _pair_table(comparison)
    return TestResult(
        test="conditional_distribution",
        verdict=verdict,
        reason=reason,
        n_queries=len(draw.records),
        n_hits=len(draw.complete),
        rate=comparison.recovery,
        p_value=comparison.p_value,
        metrics=_metrics(draw, comparison, len(columns)),
        info={
            "evidence_rule": (
                f"permutation p < {alpha} against independently drawn features, and recovery "
                f">= {min_recovery}"
            ),
            "temperature": draw.temperature,
            "invalid_samples": dict(draw.problems()),
            "prompt_form": ctx.prompt_form,
        },
        records=draw.records,
        tables={"correlation_pairs.json": pairs, "samples.json": draw.table()},
        figures={
            "correlations.png": heat_map(
                comparison.data, comparison.samples, comparison.n_samples, title
            )
        },
    )


def _pair_table(c: CorrelationComparison) -> pd.DataFrame:
    """One row per pair of numeric features: the data's and the samples' correlation."""
    names = list(c.data.columns)
    rows = [
        {
            "feature_a": names[i],
            "feature_b": names[j],
            "data_r": float(c.data.iloc[i, j]),
            "sample_r": float(c.samples.iloc[i, j]),
        }
        for i in range(len(names))
        for j in range(i + 1, len(names))
    ]
    return pd.DataFrame(rows, columns=["feature_a", "feature_b", "data_r", "sample_r"])


def _metrics(draw: SampleDraw, c: CorrelationComparison, n_numeric: int) -> dict[str, float]:
    """Sampling counts and the comparison's figures (those defined for this data)."""
    figures = {
        "recovery": c.recovery,
        "matrix_correlation": c.matrix_correlation,
        "sign_agreement": c.sign_agreement,
        "strong_pairs": c.n_strong_pairs,
        "numeric_features": n_numeric,
        "samples_used": c.n_samples,
    }
    return {**draw.counts(), **{k: float(v) for k, v in figures.items() if v is not None}}
