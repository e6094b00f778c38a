"""Token usage and cost: counted from what the provider reports, cached answers apart."""

from __future__ import annotations

import pytest

from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.openai_http import reported_usage
from tabmem.llm.pricing import FREE, Price, model_price


class MeteredBackend:
    """Answers ``a<n>`` and reports ``n + 10`` prompt and ``n`` completion tokens."""

    def __init__(self) -> None:
        self.identity = {"provider": "metered", "model": "m"}
        self.calls = 0
        self._last: dict[str, int] = {}

    def complete(self, prompt, params):
        self.calls += 1
        n = int(prompt.removeprefix("p"))
        self._last = {"prompt_tokens": n + 10, "completion_tokens": n}
        return f"a{n}"

    def chat(self, messages, params):
        raise AssertionError("not used")

    def take_usage(self):
        usage, self._last = self._last, {}
        return usage

    def count_tokens(self, text):
        return None

    def close(self):
        pass


def requests(n: int) -> list[Request]:
    return [Request(params=GenerationParams(max_tokens=5), prompt=f"p{i}") for i in range(n)]


PRICE = Price(input_per_token=1e-3, output_per_token=2e-3, source="test")


def test_reported_usage_is_counted_and_priced(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    model = LanguageModel(MeteredBackend(), "m", cache=cache, show_progress=False, price=PRICE)
    model.run(requests(4))
    # prompts 10..13 = 46 tokens, completions 0..3 = 6 tokens
    assert model.stats.prompt_tokens == 46 and model.stats.completion_tokens == 6
    assert model.stats.cost_usd == pytest.approx(46e-3 + 6 * 2e-3)
    assert model.stats.cached_prompt_tokens == 0
    assert cache.get_entry(cache_keys(model, requests(1))[0]).usage == {
        "prompt_tokens": 10,
        "completion_tokens": 0,
    }


def cache_keys(model, reqs):
    from tabmem.llm.cache import cache_key

    return [cache_key(model.backend.identity, r) for r in reqs]


def test_cached_answers_count_apart_and_cost_nothing(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    LanguageModel(MeteredBackend(), "m", cache=cache, show_progress=False, price=PRICE).run(
        requests(3)
    )
    backend = MeteredBackend()
    again = LanguageModel(backend, "m", cache=cache, show_progress=False, price=PRICE)
    again.run(requests(4))
    assert backend.calls == 1
    stats = again.stats.as_dict()
    assert stats["cached_prompt_tokens"] == 33 and stats["cached_completion_tokens"] == 3
    assert stats["prompt_tokens"] == 13 and stats["completion_tokens"] == 3
    assert stats["cost_usd"] == pytest.approx(13e-3 + 3 * 2e-3)


def test_copies_in_one_batch_count_as_cached_tokens():
    model = LanguageModel(MeteredBackend(), "m", show_progress=False, price=PRICE)
    model.run(requests(2) + requests(2))
    assert model.stats.prompt_tokens == 21 and model.stats.cached_prompt_tokens == 21


def test_a_model_without_a_price_counts_tokens_and_says_the_cost_is_unknown():
    model = LanguageModel(MeteredBackend(), "m", show_progress=False, price=None)
    model.run(requests(2))
    assert model.stats.prompt_tokens == 21
    assert model.stats.cost_usd == 0 and model.stats.unpriced_answers == 2


def test_usage_is_read_from_dicts_and_from_litellm_objects():
    class Usage:
        prompt_tokens = 7
        completion_tokens = 2

    assert reported_usage({"prompt_tokens": 5, "completion_tokens": 1}) == {
        "prompt_tokens": 5,
        "completion_tokens": 1,
    }
    assert reported_usage(Usage()) == {"prompt_tokens": 7, "completion_tokens": 2}
    assert reported_usage(None) == {} and reported_usage({"total_tokens": 3}) == {}


def test_prices_come_from_the_config_then_litellms_offline_map():
    given = model_price({"backend": "litellm", "litellm_model": "gpt-4", "input_cost_per_token": 1})
    assert given.input_per_token == 1 and given.output_per_token == 0
    gpt4 = model_price({"backend": "litellm", "litellm_model": "gpt-4"})
    assert gpt4.source == "litellm cost map" and gpt4.input_per_token > 0
    assert model_price({"backend": "litellm", "litellm_model": "openai/my-server-model"}) is None
    assert model_price({"backend": "llama_cpp"}) is FREE


def test_call_counts_since_an_earlier_snapshot_are_one_tests_share():
    from tabmem.llm.client import CallStats

    stats = CallStats()
    stats.add(model_calls=3, prompt_tokens=100)
    before = stats.as_dict()
    stats.add(model_calls=2, prompt_tokens=40, cache_hits=1)
    share = stats.since(before)
    assert (share["model_calls"], share["prompt_tokens"], share["cache_hits"]) == (2, 40, 1)
    assert share["retries"] == 0


class SilentBackend(MeteredBackend):
    """Answers as ``MeteredBackend`` but reports no token counts (a stream closed early)."""

    def take_usage(self):
        return {}


def test_answers_whose_server_reported_no_tokens_are_counted_apart():
    model = LanguageModel(SilentBackend(), "m", show_progress=False, price=PRICE)
    model.run(requests(3))
    stats = model.stats.as_dict()
    assert stats["model_calls"] == 3 and stats["uncounted_answers"] == 3
    assert stats["prompt_tokens"] == 0
    counted = LanguageModel(MeteredBackend(), "m", show_progress=False, price=PRICE)
    counted.run(requests(3))
    assert counted.stats.as_dict()["uncounted_answers"] == 0
