"""Forecast test mechanics on a hand-made series with models that answer from a script.

The series grows by 0.5% a step, so the naive forecast's robust relative error is
1 - 1/1.005 at every step, and a model's error is whatever its script makes it.
"""

import random
import re
from pathlib import Path

import pandas as pd
import pytest
from harness import settings_of

from tabmem.battery.base import TestContext
from tabmem.battery.forecast import (
    FIGURE,
    PERIODS_TABLE,
    Comparison,
    Forecast,
    ForecastSettings,
    decide,
    select_steps,
)
from tabmem.data import Dataset, DatasetSpec
from tabmem.data.series import series_view
from tabmem.errors import ConfigError
from tabmem.llm.client import LanguageModel
from tabmem.results import Verdict
from tabmem.stats.forecast import ShiftTest

DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
NAIVE_ERROR = 1 - 1 / 1.005
DATES = pd.date_range("2020-01-01", periods=731, freq="D")  # 2020 (leap) and 2021
VALUES = {f"{d.date()}": 100 * 1.005**i for i, d in enumerate(DATES)}
TEXT = "date,value\n" + "".join(f"{d},{v:.6f}\n" for d, v in VALUES.items())
PARAMS = settings_of(
    "forecast",
    period="year",
    window=20,
    steps_per_period=20,
    cap=0.02,
    question="{date_name} = {date}\n{value_name} =",
    answer="{value}",
    system_prompt="Forecast {description} from {window} steps.",
    completion_preamble="{description}\n\n",
    n_bootstrap=200,
)


def derived(**changes) -> ForecastSettings:
    """The test's settings: ``PARAMS`` with ``changes``, loaded and checked."""
    return ForecastSettings.load({**PARAMS, **changes})


def series_dataset(kind: str = "series") -> Dataset:
    spec = DatasetSpec(name="growth", kind=kind, description="a growing series.")
    return Dataset(spec=spec, path=Path("growth.csv"), text=TEXT)


class ScriptBackend:
    """Answers the date asked last (in the last user message or the prompt's last line)."""

    def __init__(self, answer):
        self.answer = answer
        self.identity = {"provider": "test", "model": str(id(answer))}
        self.seen = []

    def chat(self, messages, params):
        self.seen.append(messages)
        return self.answer(DATE.findall(messages[-1]["content"])[-1])

    def complete(self, prompt, params):
        self.seen.append(prompt)
        return self.answer(DATE.findall(prompt)[-1])

    def count_tokens(self, text):
        return None

    def tokenize(self, text):
        return None

    def close(self):
        pass


def run(answer, form="chat", dataset=None, **params):
    backend = ScriptBackend(answer)
    model = LanguageModel(backend, "script", prompt_form=form, show_progress=False)
    settings = {**PARAMS, "cutoff": "2021-01-01", **params}
    ctx = TestContext(dataset or series_dataset(), model, settings, seed=5)
    return Forecast().run(ctx), backend


def recalls_2020(date: str) -> str:
    """The truth before 2021, 5% too high after: a model whose memory stops at the cutoff."""
    value = VALUES[date]
    return f"{value:.6f}" if date < "2021-01-01" else f"{value * 1.05:.6f}"


def test_a_model_that_recalls_the_past_is_evidence_with_the_exact_p_value():
    result, _ = run(recalls_2020)
    assert result.verdict is Verdict.EVIDENCE, result.reason
    assert result.n_queries == 40
    # 20 parsed steps a side in 4 blocks of 5: C(8, 4) = 70 assignments, one as extreme.
    assert result.p_value == pytest.approx(1 / 70)
    assert result.metrics["model_error_before"] == pytest.approx(0.0, abs=1e-7)
    assert result.metrics["model_error_after"] == pytest.approx(0.02)
    assert result.baseline == pytest.approx(NAIVE_ERROR)
    assert result.n_hits == 20  # the recalled steps beat the naive forecast
    table = result.tables[PERIODS_TABLE]
    assert table["period"].tolist() == ["2020", "2021"]
    assert table["side"].tolist() == ["before", "after"]
    assert table["n_queries"].tolist() == [20, 20]
    assert table["naive_error"].tolist() == pytest.approx([NAIVE_ERROR] * 2)
    assert table["model_low"].iloc[1] == pytest.approx(0.02)
    assert FIGURE in result.figures


def test_a_model_as_good_after_the_cutoff_as_before_is_no_evidence():
    result, _ = run(lambda date: f"{VALUES[date] * 1.01:.6f}")
    assert result.verdict is Verdict.NO_EVIDENCE, result.reason
    table = result.tables[PERIODS_TABLE]
    assert table["model_error"].tolist() == pytest.approx([0.01, 0.01])
    assert result.p_value == 1.0


def test_the_naive_forecast_itself_is_no_evidence():
    def last_value(date: str) -> str:
        previous = DATES[DATES.get_loc(pd.Timestamp(date)) - 1]
        return f"{VALUES[str(previous.date())]:.6f}"

    result, _ = run(last_value)
    assert result.verdict is Verdict.NO_EVIDENCE
    assert result.rate == pytest.approx(NAIVE_ERROR)
    assert result.metrics["excess_before"] == pytest.approx(0.0, abs=1e-9)


def test_unparseable_answers_are_counted_apart_and_leave_no_verdict():
    result, _ = run(lambda date: "I cannot know that.")
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert "too few parsed forecasts" in result.reason
    assert result.metrics["n_unparseable"] == 40 and result.metrics["n_scored"] == 0
    assert all(r.error is None and r.score == 0.0 for r in result.records)


def test_failed_queries_are_counted_as_failed_not_unparseable():
    def flaky(date: str) -> str:
        if date.endswith("-15"):
            raise RuntimeError("provider down")
        return recalls_2020(date)

    result, _ = run(flaky, steps_per_period=None, start="2020-11-01", end="2021-02-28")
    failed = [r for r in result.records if r.error]
    assert len(failed) == 4  # the 15th of Nov, Dec, Jan and Feb
    table = result.tables[PERIODS_TABLE]
    assert table["n_failed"].sum() == 4 and table["n_unparseable"].sum() == 0


def test_chat_prompt_holds_the_window_as_turns_and_asks_for_the_next_date():
    result, backend = run(recalls_2020, window=3, steps_per_period=1)
    messages = backend.seen[0]
    record = result.records[0]
    rows = TEXT.splitlines()
    at = next(k for k, line in enumerate(rows) if line.startswith(record.extra["date"]))
    assert messages[0] == {"role": "system", "content": "Forecast a growing series. from 3 steps."}
    assert len(messages) == 1 + 2 * 3 + 1
    assert [m["role"] for m in messages[1:3]] == ["user", "assistant"]
    assert messages[1]["content"] == f"date = {rows[at - 3].split(',')[0]}\nvalue ="
    assert messages[2]["content"] == rows[at - 3].split(",")[1]
    assert messages[-1]["content"] == f"date = {record.extra['date']}\nvalue ="
    assert record.expected == rows[at].split(",")[1]


def test_completion_prompt_is_the_csv_window_ending_with_the_next_date():
    result, backend = run(recalls_2020, form="completion", window=3, steps_per_period=1)
    prompt = backend.seen[0]
    date = result.records[0].extra["date"]
    rows = TEXT.splitlines()
    at = next(k for k, line in enumerate(rows) if line.startswith(date))
    expected_csv = "date,value\n" + "\n".join(rows[at - 3 : at]) + f"\n{date},"
    assert prompt == "a growing series.\n\n" + expected_csv


def test_same_seed_same_steps_and_sampling_per_period():
    series = series_view(series_dataset())
    settings = derived(steps_per_period=5)
    first = select_steps(series, settings, random.Random(1))
    assert first == select_steps(series, settings, random.Random(1))
    assert len(first) == 10 and first == sorted(first)
    every = derived(steps_per_period=None, start="2021-12-01")
    assert select_steps(series, every, random.Random(1)) == list(range(700, 731))


def test_without_a_cutoff_the_periods_are_scored_but_there_is_no_verdict():
    result, _ = run(recalls_2020, cutoff=None)
    assert result.verdict is Verdict.NOT_APPLICABLE and "test.cutoff" in result.reason
    assert result.tables[PERIODS_TABLE]["side"].tolist() == ["", ""]


def test_a_period_across_the_cutoff_is_marked_as_spanning_it():
    result, _ = run(recalls_2020, cutoff="2020-07-01")
    assert result.tables[PERIODS_TABLE]["side"].tolist() == ["spans", "after"]
    assert result.info["spanning_periods"] == ["2020"]


def test_a_tabular_dataset_is_not_applicable():
    result, backend = run(recalls_2020, dataset=series_dataset(kind="tabular"))
    assert result.verdict is Verdict.NOT_APPLICABLE and "kind: series" in result.reason
    assert backend.seen == []


@pytest.mark.parametrize(("name", "value"), [("period", "week"), ("cutoff", "soon")])
def test_bad_settings_stop_with_one_sentence(name, value):
    with pytest.raises(ConfigError, match=name):
        derived(**{name: value})


def shift(p_value: float, difference: float = 0.01) -> ShiftTest:
    return ShiftTest(difference, p_value, 4, 4, exact=True)


@pytest.mark.parametrize(
    ("error", "excess", "verdict"),
    [
        (shift(0.01), shift(0.01), Verdict.EVIDENCE),
        (shift(0.01), shift(0.30), Verdict.AMBIGUOUS),  # the earlier periods were just easier
        (shift(0.01), shift(0.01, difference=0.0005), Verdict.AMBIGUOUS),  # too small to matter
        (shift(0.30), shift(0.01), Verdict.NO_EVIDENCE),  # only the naive forecast got worse
        (shift(0.30), shift(0.30), Verdict.NO_EVIDENCE),
    ],
)
def test_verdict_rule(error, excess, verdict):
    settings = derived()
    assert decide(Comparison(error, excess, 20, 20), settings)[0] is verdict


def test_too_few_steps_on_one_side_is_not_applicable():
    settings = derived()
    verdict, reason = decide(Comparison(shift(0.01), shift(0.01), 20, 3), settings)
    assert verdict is Verdict.NOT_APPLICABLE and "3 after" in reason
