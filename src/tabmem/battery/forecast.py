"""The forecast test: does the model forecast a series better before a cutoff date than after?

A model that saw a series during training can "forecast" the days it saw by recalling them;
after its training cutoff it can only forecast. For each sampled step the model sees the
previous ``window`` values (in chat form, one user/assistant turn per step; base models read
them as CSV lines) and gives the next one. Each forecast is scored by the robust relative error
``min(|ŷ − y| / |y|, cap)`` beside the naive forecast "the next value equals the last one",
per period (calendar year by default), and the steps before the cutoff are compared with those
after it: see ``decide`` for the rule and docs/forecast.md for what it means.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, Lifecycle, Worded, register_lifecycle
from tabmem.battery.settings import TestSettings
from tabmem.data.series import Series, series_view
from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams, Request
from tabmem.prompts.fewshot import chat_messages, fit_to_context
from tabmem.results import QueryRecord, TestResult, Verdict
from tabmem.stats.forecast import (
    ShiftTest,
    block_bootstrap_interval,
    parse_forecast,
    robust_relative_error,
    shift_test,
)
from tabmem.stats.scoring import strip_code_fence

PERIOD_FREQ = {"year": "Y", "quarter": "Q", "month": "M"}
PERIODS_TABLE = "forecast_periods.json"
FIGURE = "forecast_errors.png"


@dataclass(frozen=True)
class ForecastSettings(TestSettings):
    """``conf/test/forecast.yaml``; the dates and the period are checked when it loads."""

    cutoff: str | None
    period: str
    start: str | None
    end: str | None
    window: int
    steps_per_period: int | None
    cap: float
    alpha: float
    min_difference: float
    min_steps: int
    block_length: int
    n_permutations: int
    n_bootstrap: int
    confidence: float
    max_tokens: int
    system_prompt: str
    question: str
    answer: str
    completion_preamble: str

    def __post_init__(self) -> None:
        if self.period not in PERIOD_FREQ:
            raise ConfigError(
                f"test.period is '{self.period}'; choose one of: {', '.join(PERIOD_FREQ)}."
            )
        for name in ("cutoff", "start", "end"):
            _date(getattr(self, name), name)

    @property
    def freq(self) -> str:
        """The pandas frequency of a period."""
        return PERIOD_FREQ[self.period]

    @cached_property
    def cutoff_date(self) -> pd.Timestamp | None:
        return _date(self.cutoff, "cutoff")

    @cached_property
    def start_date(self) -> pd.Timestamp | None:
        return _date(self.start, "start")

    @cached_property
    def end_date(self) -> pd.Timestamp | None:
        return _date(self.end, "end")


def _date(value: Any, name: str) -> pd.Timestamp | None:
    if value is None or str(value) == "":
        return None
    try:
        return pd.Timestamp(str(value))
    except ValueError as exc:
        raise ConfigError(f"test.{name} is '{value}', which is not a date (YYYY-MM-DD).") from exc


def select_steps(series: Series, s: ForecastSettings, rng: random.Random) -> list[int]:
    """Rows to forecast: those with a full window before them, inside [start, end], sampled
    ``steps_per_period`` per period (all of them when that is None), in time order."""
    by_period: dict[pd.Period, list[int]] = {}
    start, end = s.start_date, s.end_date
    for i in range(max(s.window, 1), len(series)):
        date = series.dates[i]
        if (start is None or date >= start) and (end is None or date <= end):
            by_period.setdefault(date.to_period(s.freq), []).append(i)
    chosen: list[int] = []
    for rows in by_period.values():
        take = len(rows) if s.steps_per_period is None else min(s.steps_per_period, len(rows))
        chosen += sorted(rng.sample(rows, take))
    return chosen


def _fields(series: Series, description: str, window: int) -> dict[str, Any]:
    return {
        "description": description,
        "window": window,
        "date_name": series.date_name,
        "value_name": series.value_name,
    }


def build_request(
    series: Series, i: int, ctx: TestContext, s: ForecastSettings, description: str
) -> Request:
    """The chat turns (or, for base models, CSV lines) of the ``window`` steps before row ``i``,
    ending with the question for row ``i``."""
    p = ctx.params
    fields = _fields(series, description, s.window)
    rows = range(i - s.window, i)
    max_tokens = p.max_tokens
    if ctx.prompt_form == "chat":
        question, answer = p.question, p.answer
        turns = [
            (
                question.format(**fields, date=series.date_text[j]),
                answer.format(**fields, value=series.value_text[j]),
            )
            for j in rows
        ]
        system = p.system_prompt.format(**fields)
        messages = chat_messages(system, turns, question.format(**fields, date=series.date_text[i]))
        params = GenerationParams(max_tokens=max_tokens, temperature=0.0, seed=ctx.seed)
        return Request(params=params, messages=messages)
    delimiter, newline = ctx.dataset.delimiter, ctx.dataset.newline
    lines = [delimiter.join((series.date_name, series.value_name))]
    lines += [series.date_text[j] + delimiter + series.value_text[j] for j in rows]
    prompt = p.completion_preamble.format(**fields) + newline.join(lines)
    prompt += newline + series.date_text[i] + delimiter
    params = GenerationParams(max_tokens=max_tokens, temperature=0.0, stop=("\n",), seed=ctx.seed)
    return Request(params=params, prompt=prompt)


@dataclass
class Scored:
    """Every queried step: where it is, the forecasts and their robust relative errors."""

    rows: np.ndarray
    periods: list[pd.Period]
    after: np.ndarray
    forecast: np.ndarray
    model_error: np.ndarray
    naive_error: np.ndarray
    failed: np.ndarray

    @property
    def parsed(self) -> np.ndarray:
        return ~np.isnan(self.forecast)

    @property
    def unparseable(self) -> np.ndarray:
        return ~self.parsed & ~self.failed


def _forecast(text: str, date_text: str, failed: bool) -> float:
    """The number an answer gives, NaN for a failed query or an answer without a number."""
    value = None if failed else parse_forecast(strip_code_fence(text), date_text)
    return np.nan if value is None else value


def score(
    series: Series, rows: list[int], texts: list[str], failed: list[bool], s: ForecastSettings
) -> Scored:
    """Parse each answer and score it, and the naive forecast, against the true value."""
    index = np.asarray(rows, dtype=int)
    forecast = np.array(
        [
            _forecast(t, series.date_text[i], bad)
            for i, t, bad in zip(rows, texts, failed, strict=True)
        ],
        dtype=float,
    )
    truth = series.values[index]
    after = np.zeros(len(rows), dtype=bool)
    if s.cutoff_date is not None:
        after = np.asarray(series.dates[index] >= s.cutoff_date)
    return Scored(
        rows=index,
        periods=[series.dates[i].to_period(s.freq) for i in rows],
        after=after,
        forecast=forecast,
        model_error=robust_relative_error(forecast, truth, s.cap),
        naive_error=robust_relative_error(series.values[index - 1], truth, s.cap),
        failed=np.asarray(failed, dtype=bool),
    )


def side_of(period: pd.Period, cutoff: pd.Timestamp | None) -> str:
    """Where a period lies: wholly before the cutoff, wholly after it, or across it."""
    if cutoff is None:
        return ""
    if period.end_time < cutoff:
        return "before"
    return "after" if period.start_time >= cutoff else "spans"


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")


def period_table(scored: Scored, s: ForecastSettings, rng: np.random.Generator) -> pd.DataFrame:
    """One row per period: counts, the model's and the naive forecast's mean robust relative
    error with block-bootstrap intervals. The model's error is over its parsed forecasts, the
    naive one over every queried step (the same for every model)."""
    labels = np.array([str(p) for p in scored.periods])
    rows = []
    for period in sorted(set(scored.periods)):
        here = labels == str(period)
        model = scored.model_error[here & scored.parsed]
        naive = scored.naive_error[here]
        interval = {
            name: block_bootstrap_interval(values, s.block_length, s.n_bootstrap, s.confidence, rng)
            for name, values in (("model", model), ("naive", naive))
        }
        rows.append(
            {
                "period": str(period),
                "side": side_of(period, s.cutoff_date),
                "start": period.start_time.date().isoformat(),
                "end": period.end_time.date().isoformat(),
                "n_queries": int(here.sum()),
                "n_scored": len(model),
                "n_unparseable": int((here & scored.unparseable).sum()),
                "n_failed": int((here & scored.failed).sum()),
                "model_error": _mean(model),
                "model_low": interval["model"][0],
                "model_high": interval["model"][1],
                "naive_error": _mean(naive),
                "naive_low": interval["naive"][0],
                "naive_high": interval["naive"][1],
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Comparison:
    """The two one-sided tests across the cutoff, on parsed forecasts only: the model's own
    error, and its excess error over the naive forecast of the same steps."""

    error: ShiftTest
    excess: ShiftTest
    n_before: int
    n_after: int


def compare(scored: Scored, s: ForecastSettings, rng: np.random.Generator) -> Comparison:
    """Test whether errors are higher on/after the cutoff than before it."""
    before = scored.parsed & ~scored.after
    after = scored.parsed & scored.after
    error = scored.model_error
    excess = error - scored.naive_error
    return Comparison(
        error=shift_test(error[before], error[after], s.block_length, s.n_permutations, rng),
        excess=shift_test(excess[before], excess[after], s.block_length, s.n_permutations, rng),
        n_before=int(before.sum()),
        n_after=int(after.sum()),
    )


def decide(c: Comparison, s: ForecastSettings) -> tuple[Verdict, str]:
    """``evidence``: the model's error and its excess over the naive forecast are both
    significantly lower before the cutoff (each one-sided test at ``alpha``; the larger p-value
    is the result's) and the excess shifts by at least ``min_difference``. ``ambiguous``: the
    model's error is lower before, but not (enough) relative to the naive forecast, so the
    earlier periods may just have been easier. ``no_evidence`` otherwise."""
    if c.n_before < s.min_steps or c.n_after < s.min_steps:
        return Verdict.NOT_APPLICABLE, (
            f"too few parsed forecasts around the cutoff ({c.n_before} before, {c.n_after} "
            f"after; {s.min_steps} needed on each side)"
        )
    figures = (
        f"mean error shift {100 * c.error.difference:+.2f} points (p={c.error.p_value:.2g}), "
        f"excess over naive shift {100 * c.excess.difference:+.2f} points "
        f"(p={c.excess.p_value:.2g})"
    )
    error_lower = c.error.p_value <= s.alpha
    excess_lower = c.excess.p_value <= s.alpha and c.excess.difference >= s.min_difference
    if error_lower and excess_lower:
        return Verdict.EVIDENCE, f"the model forecasts better before the cutoff: {figures}"
    if error_lower:
        return Verdict.AMBIGUOUS, (
            f"the model's error is lower before the cutoff but not enough relative to the naive "
            f"forecast: {figures}"
        )
    return Verdict.NO_EVIDENCE, f"no significant improvement before the cutoff: {figures}"


def error_figure(table: pd.DataFrame, title: str) -> Any:
    """Per-period mean errors (in %) of the model and the naive forecast, with their intervals
    and a dashed line where the cutoff falls."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(6.0, 0.3 * len(table) + 2.0), 3.8))
    axes = figure.subplots()
    x = np.arange(len(table))
    for name, label in (("model", "model"), ("naive", "naive (last value)")):
        mean = 100 * table[f"{name}_error"].to_numpy(dtype=float)
        low = 100 * table[f"{name}_low"].to_numpy(dtype=float)
        high = 100 * table[f"{name}_high"].to_numpy(dtype=float)
        spread = np.nan_to_num(np.clip([mean - low, high - mean], 0, None))
        axes.errorbar(x, mean, yerr=spread, fmt="o-", capsize=3, markersize=4, label=label)
    later = np.flatnonzero(table["side"].isin(["after", "spans"]).to_numpy())
    if len(later) and (table["side"] == "before").any():
        axes.axvline(later[0] - 0.5, color="grey", linestyle="--", label="cutoff")
    axes.set_xticks(x, table["period"], rotation=90)
    axes.set_ylabel("robust mean relative error (%)")
    axes.set_title(title)
    axes.legend()
    figure.tight_layout()
    return figure


def _side_means(scored: Scored, after: bool) -> dict[str, float]:
    side = scored.after == after
    used = side & scored.parsed
    name = "after" if after else "before"
    return {
        f"model_error_{name}": _mean(scored.model_error[used]),
        f"naive_error_{name}": _mean(scored.naive_error[side]),
        f"excess_{name}": _mean(scored.model_error[used] - scored.naive_error[used]),
        f"n_scored_{name}": int(used.sum()),
    }


def _metrics(
    scored: Scored, table: pd.DataFrame, comparison: Comparison | None, skipped: int, dropped: int
) -> dict[str, float]:
    metrics: dict[str, float] = {
        "n_scored": int(scored.parsed.sum()),
        "n_unparseable": int(scored.unparseable.sum()),
        "steps_skipped": skipped,
        "dropped_rows": dropped,
    }
    if comparison is not None:
        before = table.loc[table["side"] == "before", "model_error"].dropna()
        metrics |= _side_means(scored, after=False) | _side_means(scored, after=True)
        metrics |= {
            "before_period_min": float(before.min()) if len(before) else float("nan"),
            "before_period_max": float(before.max()) if len(before) else float("nan"),
            "shift_error": comparison.error.difference,
            "shift_excess": comparison.excess.difference,
            "p_value_error": comparison.error.p_value,
            "p_value_excess": comparison.excess.p_value,
        }
    for row in table.itertuples():
        metrics[f"model_error.{row.period}"] = row.model_error
        metrics[f"naive_error.{row.period}"] = row.naive_error
    return metrics


@register_lifecycle
class Forecast(Lifecycle[int, Series]):
    """Forecast sampled steps of the series; score them per period; compare across the cutoff."""

    name = "forecast"
    claims = "forecast"
    title = "forecast"
    settings = ForecastSettings

    def plan(self, ctx: TestContext) -> tuple[list[int], Series] | TestResult:
        if ctx.dataset.spec.kind != "series":
            return TestResult.not_applicable(
                self.name,
                f"test=forecast needs a time series (a dataset with kind: series); "
                f"'{ctx.dataset.name}' is {ctx.dataset.spec.kind}",
            )
        series = series_view(ctx.dataset)
        return select_steps(series, ctx.params, random.Random(ctx.seed)), series

    def word(self, ctx: TestContext, queries: Sequence[int], facts: Series) -> Worded[int]:
        """The request of each step that fits the context window; the others are skipped."""
        model = ctx.model_for("Wording")
        s, series = ctx.params, facts
        description = ctx.dataset.spec.description or f"the series '{ctx.dataset.name}'."
        worded: Worded[int] = Worded([], [])
        skipped = 0
        for i in queries:
            request = build_request(series, i, ctx, s, description)
            fitted = fit_to_context(
                lambda _kept, r=request: r,
                0,
                model.count_tokens,
                model.context_window,
                request.params,
            )
            if fitted.request is None:
                skipped += 1
                continue
            worded.queries.append(i)
            worded.requests.append(request)
        worded.context = {"steps_skipped": skipped}
        return worded

    def unfit(self, ctx: TestContext, facts: Series, worded: Worded[int]) -> TestResult:
        skipped = worded.context["steps_skipped"]
        return TestResult.not_applicable(
            self.name,
            f"no step to forecast: the series has {len(facts)} values, the window is "
            f"{ctx.params.window}, and {skipped} step(s) did not fit the context window",
            info={"steps_skipped": skipped},
        )

    def score(self, ctx: TestContext, facts: Series, answer: Answer[int]) -> QueryRecord:
        series, s, i, response = facts, ctx.params, answer.query, answer.response
        scored = score(series, [i], [response.text], [response.error is not None], s)
        parsed = bool(scored.parsed[0])
        error = float(scored.model_error[0]) if parsed else None
        request = answer.request
        asked = (
            answer.prompt
            if request is None
            else request.prompt
            if request.messages is None
            else request.messages[-1]["content"]
        )
        return QueryRecord(
            prompt=answer.prompt,
            expected=series.value_text[i],
            completion=response.text,
            score=0.0 if error is None else 1.0 - error / s.cap,
            error=response.error,
            extra={
                "row": i,
                "date": series.date_text[i],
                "period": str(scored.periods[0]),
                "side": "after" if scored.after[0] else ("before" if s.cutoff_date else ""),
                "forecast": float(scored.forecast[0]) if parsed else None,
                "naive_forecast": float(series.values[i - 1]),
                "relative_error": error,
                "naive_relative_error": float(scored.naive_error[0]),
                "parsed": parsed,
                "prefix": asked[-300:],
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: Series,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        """The errors per period, and the comparison across the cutoff."""
        series, s = facts, ctx.params
        rows = [int(r.extra["row"]) for r in records]
        failed = [r.error is not None for r in records]
        scored = score(series, rows, [r.completion for r in records], failed, s)
        rng = np.random.default_rng(ctx.seed)
        table = period_table(scored, s, rng)
        comparison = compare(scored, s, rng) if s.cutoff_date is not None else None
        if comparison is None:
            verdict, reason = Verdict.NOT_APPLICABLE, "no cutoff date: set test.cutoff=YYYY-MM-DD"
        else:
            verdict, reason = decide(comparison, s)
        parsed = scored.parsed
        model = ctx.model.name if ctx.model is not None else "transcript"
        skipped = int(context.get("steps_skipped", 0))
        return TestResult(
            test=self.name,
            verdict=verdict,
            reason=reason,
            n_queries=len(records),
            n_hits=int((parsed & (scored.model_error < scored.naive_error)).sum()),
            rate=_mean(scored.model_error[parsed]),
            baseline=_mean(scored.naive_error),
            p_value=None
            if comparison is None
            else max(comparison.error.p_value, comparison.excess.p_value),
            metrics=_metrics(scored, table, comparison, skipped, series.dropped_rows),
            info=_info(ctx, series, s, table),
            records=list(records),
            tables={PERIODS_TABLE: table},
            figures={FIGURE: error_figure(table, f"{model} on {ctx.dataset.name}")},
        )


def _info(
    ctx: TestContext, series: Series, s: ForecastSettings, table: pd.DataFrame
) -> dict[str, Any]:
    return {
        "cutoff": None if s.cutoff_date is None else s.cutoff_date.date().isoformat(),
        "period": ctx.params.period,
        "before_periods": table.loc[table["side"] == "before", "period"].tolist(),
        "after_periods": table.loc[table["side"] == "after", "period"].tolist(),
        "spanning_periods": table.loc[table["side"] == "spans", "period"].tolist(),
        "series_range": [series.date_text[0], series.date_text[-1]],
        "prompt_form": ctx.prompt_form,
        "rate": "the model's robust mean relative error over its parsed forecasts",
        "baseline": "the naive forecast's (next value = last value) over every queried step",
        "n_hits": "parsed forecasts with a lower error than the naive forecast's",
        "evidence_rule": (
            f"model error and its excess over the naive forecast both lower before the cutoff "
            f"(one-sided block permutation tests, each p <= {s.alpha}), excess shift >= "
            f"{s.min_difference}"
        ),
    }
