"""Reasoning models: thoughts cut off the answer, stops applied after them, room for them."""

from __future__ import annotations

import threading
import time

import pytest

from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.openai_http import reported_usage
from tabmem.llm.plan import RequestPlan
from tabmem.llm.reasoning import (
    DEFAULT_ALLOWANCE,
    Reasoning,
    finish,
    provider_params,
    split_thoughts,
)
from tabmem.llm.stopping import StopRule


@pytest.mark.parametrize(
    ("text", "answer", "thoughts"),
    [
        ("<think>\nrows?\nyes</think>\n\n5.1,3.5", "5.1,3.5", "rows?\nyes"),
        ("  <THINKING>a</THINKING>b", "b", "a"),
        ("<reasoning>a</reasoning>b</think>c", "b</think>c", "a"),
        ("the R1 form: prompt opened it</think>answer", "answer", "the R1 form: prompt opened it"),
        ("<think>ran out of tokens", "", "ran out of tokens"),
        ("no thoughts at all", "no thoughts at all", ""),
        ("an answer that mentions <think> later", "an answer that mentions <think> later", ""),
    ],
)
def test_thoughts_are_split_off_the_answer(text, answer, thoughts):
    assert split_thoughts(text) == (answer, thoughts)


def test_stops_and_the_stop_rule_apply_to_the_answer_after_the_thoughts():
    params = GenerationParams(max_tokens=10, stop=("\n",))
    assert finish("<think>line one\nline two</think>a,b\nc,d", params) == (
        "a,b",
        "line one\nline two",
    )
    rule = StopRule.verbatim("a,b")
    ruled = GenerationParams(max_tokens=10, stop_rule=rule)
    assert finish("<think>x</think>a,c,d", ruled)[0] == rule.cut("a,c,d") != "a,c,d"


def test_the_provider_gets_no_stops_and_room_for_thoughts():
    params = GenerationParams(max_tokens=30, stop=("\n",), stop_rule=StopRule.verbatim("x"))
    sent = provider_params(params, Reasoning("inline", allowance=500))
    assert (sent.max_tokens, sent.stop, sent.stop_rule) == (530, (), None)
    assert provider_params(params, Reasoning()) is params


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("o3-mini", "separate"),
        ("openai/gpt-5", "separate"),
        ("deepseek/deepseek-reasoner", "separate"),
        ("ollama/qwen3:8b", "inline"),
        ("hosted_vllm/deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "inline"),
        ("gpt-4o", "none"),
        ("openai/oracle-memorizer", "none"),
    ],
)
def test_a_model_name_implies_a_default_mode(name, mode):
    reasoning = Reasoning.from_config({}, name)
    assert reasoning.mode == mode
    assert reasoning.allowance == (0 if mode == "none" else 2048)


def test_a_config_overrides_the_default_and_an_unknown_mode_is_refused():
    assert Reasoning.from_config({"reasoning": "none"}, "o3").mode == "none"
    chosen = Reasoning.from_config(
        {"reasoning": "inline", "reasoning_allowance": 64, "reasoning_effort": "low"}, "m"
    )
    assert (chosen.mode, chosen.allowance, chosen.effort) == ("inline", 64, "low")
    with pytest.raises(ConfigError, match="not a mode"):
        Reasoning.from_config({"reasoning": "loud"}, "m")


def test_a_model_config_reads_its_provider_model_name_first():
    served = {"name": "my-model", "litellm_model": "openai/gpt-5", "reasoning_effort": "high"}
    assert (Reasoning.of_model(served).mode, Reasoning.of_model(served).effort) == (
        "separate",
        "high",
    )
    assert Reasoning.of_model({"name": "ollama/qwen3:8b"}).mode == "inline"
    assert Reasoning.of_model({"name": "openai/gpt-5", "litellm_model": "gpt-4o"}).mode == "none"


def test_reported_reasoning_tokens_are_kept():
    usage = {
        "prompt_tokens": 5,
        "completion_tokens": 40,
        "completion_tokens_details": {"reasoning_tokens": 32},
    }
    assert reported_usage(usage) == {
        "prompt_tokens": 5,
        "completion_tokens": 40,
        "reasoning_tokens": 32,
    }
    assert "reasoning_tokens" not in reported_usage({"prompt_tokens": 5, "completion_tokens": 4})


class ThinkingBackend:
    """Thinks, then answers ``a,b`` and a second line, unless a stop sequence came first."""

    def __init__(self) -> None:
        self.identity = {"provider": "thinking"}
        self.sent: list[GenerationParams] = []

    def complete(self, prompt, params):
        self.sent.append(params)
        text = "<think>first\nsecond</think>a,b\nc,d"
        for stop in params.stop:
            text = text.split(stop)[0]
        return text

    def count_tokens(self, text):
        return len(text.split())

    def close(self):
        pass


def test_a_reasoning_model_answers_after_its_thoughts_and_keeps_them_in_the_cache(tmp_path):
    params = GenerationParams(max_tokens=8, stop=("\n",))
    backend = ThinkingBackend()
    said_none = Reasoning.from_config({"reasoning": "none"}, "m")  # no detection when said
    plain = LanguageModel(backend, "m", show_progress=False, reasoning=said_none)
    assert plain.run([Request(params=params, prompt="p")])[0].text == "<think>first"
    cache = ResponseCache(tmp_path / "c.sqlite")
    thinking = LanguageModel(
        backend, "m", cache=cache, show_progress=False, reasoning=Reasoning("inline", 100)
    )
    [fresh] = thinking.run([Request(params=params, prompt="p")])
    assert (fresh.text, fresh.reasoning) == ("a,b", "first\nsecond")
    assert backend.sent[-1].max_tokens == 108 and backend.sent[-1].stop == ()
    assert thinking.stats.reasoning_tokens == 2  # "first\nsecond": two words by this tokenizer
    [again] = thinking.run([Request(params=params, prompt="p")])
    assert (again.text, again.reasoning, again.cached) == ("a,b", "first\nsecond", True)
    assert len(backend.sent) == 2


def test_a_dry_run_counts_the_reasoning_allowance_in_the_bound():
    plan = RequestPlan()
    model = LanguageModel(
        ThinkingBackend(), "m", show_progress=False, plan=plan, reasoning=Reasoning("inline", 100)
    )
    model.run([Request(params=GenerationParams(max_tokens=8), prompt=f"p{i}") for i in range(3)])
    counted = plan.as_dict(None)
    assert counted["max_completion_tokens"] == 3 * 108
    assert counted["reasoning_tokens"] == 300


def test_a_model_under_an_unknown_name_is_found_to_think_and_told_once(tmp_path, caplog):
    """A plain config (no ``reasoning:``, a name that implies none) whose replies open with a
    think block: the first reply switches the model to inline reasoning, that request is asked
    again with room to think, every answer is scored without its thoughts, one warning."""
    assert Reasoning.from_config({}, "my-served-model").detect
    backend = ThinkingBackend()
    cache = ResponseCache(tmp_path / "c.sqlite")
    model = LanguageModel(backend, "my-served-model", cache=cache, show_progress=False)
    params = GenerationParams(max_tokens=8, stop=("\n",))
    with caplog.at_level("WARNING", logger="tabmem.llm.client"):
        first = model.run([Request(params=params, prompt="p")])
        later = model.run([Request(params=params, prompt=f"q{i}") for i in range(3)])
    assert [r.text for r in first + later] == ["a,b"] * 4
    assert {r.reasoning for r in first + later} == {"first\nsecond"}
    assert model.reasoning.mode == "inline" and model.reasoning.allowance == DEFAULT_ALLOWANCE
    assert [p.max_tokens for p in backend.sent] == [8] + [8 + DEFAULT_ALLOWANCE] * 4
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert len(caplog.records) == 1 and "my-served-model" in caplog.records[0].message
    again = LanguageModel(backend, "my-served-model", cache=cache, show_progress=False)
    assert again.run([Request(params=params, prompt="p")])[0].text == "a,b"
    assert len(backend.sent) == 5  # the cached thoughtful reply is found again, nothing sent


def test_requests_in_flight_when_the_model_is_found_to_think_are_asked_again():
    """Three requests sent at once to a model not known to reason: the first reply switches
    it, the other two come back after that cut by the stop sequence to an empty think block;
    each is asked again with room to think, so all three are scored on the whole answer."""

    class Racing(ThinkingBackend):
        model: LanguageModel
        all_sent = threading.Barrier(3)

        def complete(self, prompt, params):
            if not self.model.reasoning.active:
                self.all_sent.wait(timeout=10)  # all three are in flight before any returns
            if prompt != "first":
                deadline = time.monotonic() + 10
                while not self.model.reasoning.active and time.monotonic() < deadline:
                    time.sleep(0.01)
            self.sent.append(params)
            text = "<think>\nfirst\nsecond</think>a,b\nc,d"  # a stop cuts it to "<think>"
            for stop in params.stop:
                text = text.split(stop)[0]
            return text

    backend = Racing()
    backend.model = LanguageModel(backend, "m", show_progress=False, max_concurrency=3)
    params = GenerationParams(max_tokens=8, stop=("\n",))
    answers = backend.model.run([Request(params=params, prompt=p) for p in ("first", "b", "c")])
    assert [a.text for a in answers] == ["a,b"] * 3
    assert sorted(p.max_tokens for p in backend.sent) == [8] * 3 + [8 + DEFAULT_ALLOWANCE] * 3


def test_a_model_that_answers_without_thoughts_stays_plain():
    class Plain(ThinkingBackend):
        def complete(self, prompt, params):
            self.sent.append(params)
            return "a,b <think> is no thought block here"

    model = LanguageModel(Plain(), "m", show_progress=False)
    [answer] = model.run([Request(params=GenerationParams(max_tokens=8), prompt="p")])
    assert answer.text.startswith("a,b") and not model.reasoning.active
