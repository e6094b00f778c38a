"""Paid-API savings: the batch price, reading batch output lines, which models can batch, and
provider prompt caching (the prefix marked for Anthropic, cache reads and writes priced)."""

from __future__ import annotations

import json

import pytest

from tabmem.errors import ConfigError
from tabmem.llm.batch import BatchAnswer, _anthropic_result, _parse_line, anthropic_params
from tabmem.llm.litellm_backend import LiteLLMBackend, with_cached_prefix
from tabmem.llm.openai_http import reply_text, reported_usage
from tabmem.llm.pricing import Price, model_price
from tabmem.llm.registry import build_model


def test_the_batch_price_is_the_cost_maps_else_half():
    listed = model_price({"backend": "litellm", "litellm_model": "gpt-4o"}, batch=True)
    full = model_price({"backend": "litellm", "litellm_model": "gpt-4o"})
    assert listed is not None and full is not None
    assert listed.input_per_token == pytest.approx(full.input_per_token / 2)
    assert "batch prices" in listed.source
    configured = {"backend": "litellm", "litellm_model": "x/y", "input_cost_per_token": 2e-6}
    halved = model_price({**configured, "output_cost_per_token": 4e-6}, batch=True)
    assert (halved.input_per_token, halved.output_per_token) == (1e-6, 2e-6)
    assert model_price({"backend": "oracle"}, batch=True).cost(100, 100) == 0


def test_output_and_error_lines_are_read_by_custom_id():
    ok = {"custom_id": "k1", "response": {"status_code": 200, "body": {"choices": []}}}
    assert _parse_line(json.dumps(ok)) == ("k1", BatchAnswer({"choices": []}))
    failed = {
        "custom_id": "k2",
        "response": {"status_code": 429, "body": {"error": {"message": "slow down"}}},
    }
    assert _parse_line(json.dumps(failed)) == ("k2", BatchAnswer(None, "HTTP 429: slow down"))


def test_a_model_that_runs_here_cannot_batch(tmp_path):
    cfg = {"name": "b", "backend": "baseline", "estimator": "majority_class"}
    with pytest.raises(ConfigError, match="not an API model"):
        build_model(cfg, None, tmp_path, batch_dir=tmp_path / "batches")


def test_anthropic_requests_mark_the_shared_prefix_for_the_prompt_cache():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "example"},
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "question"},
    ]
    marked = with_cached_prefix(messages)
    assert marked[-2]["content"] == [
        {"type": "text", "text": "answer", "cache_control": {"type": "ephemeral"}}
    ]
    assert marked[:2] == messages[:2] and marked[-1] == messages[-1]
    assert messages[-2]["content"] == "answer"  # the request itself (and its cache key) unchanged
    claude = LiteLLMBackend("anthropic/claude-sonnet-4-5", "c", require_credentials=False)
    assert claude.mark_prefix and not LiteLLMBackend("gpt-4o", "g").mark_prefix


def test_cache_reads_and_writes_are_priced_apart():
    price = Price(1e-5, 3e-5, "config", cache_read_per_token=1e-6, cache_write_per_token=2e-5)
    assert price.cost(100, 10, cache_read_tokens=60, cache_write_tokens=30) == pytest.approx(
        10 * 1e-5 + 60 * 1e-6 + 30 * 2e-5 + 10 * 3e-5
    )
    assert Price(1e-5, 3e-5, "config").cost(100, 10, 60) == pytest.approx(100 * 1e-5 + 10 * 3e-5)
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 60},
    }
    assert reported_usage(usage)["cache_read_tokens"] == 60
    anthropic = {"prompt_tokens": 100, "completion_tokens": 10, "cache_read_input_tokens": 50}
    assert reported_usage({**anthropic, "cache_creation_input_tokens": 20}) == {
        **{k: v for k, v in anthropic.items() if k != "cache_read_input_tokens"},
        "cache_read_tokens": 50,
        "cache_write_tokens": 20,
    }


def test_a_chat_body_becomes_anthropic_parameters_and_a_result_an_openai_reply():
    body = {
        "model": "claude-x",
        "max_tokens": 20,
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 0,
        "stop": ["\n", "END"],
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
    }
    assert anthropic_params(body) == {
        "model": "claude-x",
        "max_tokens": 20,
        "messages": [{"role": "user", "content": "q"}],
        "temperature": 0.0,
        "system": "s",
        "stop_sequences": ["END"],  # whitespace alone is refused; the caller cuts at "\n"
    }
    result = {
        "type": "succeeded",
        "message": {
            "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "a,b"}],
            "usage": {"input_tokens": 5, "output_tokens": 7, "cache_read_input_tokens": 3},
        },
    }
    reply = _anthropic_result(result).body
    assert reply_text("chat", reply) == "<think>hm</think>a,b"
    assert reported_usage(reply["usage"]) == {
        "prompt_tokens": 8,
        "completion_tokens": 7,
        "cache_read_tokens": 3,
    }
    failed = {"type": "errored", "error": {"type": "error", "error": {"message": "overloaded"}}}
    assert _anthropic_result(failed) == BatchAnswer(None, "errored: overloaded")
