"""How the embedded backend reads the llama.cpp engine's replies (no model needed)."""

import pytest

from tabmem.errors import ProviderError
from tabmem.llm.llama_cpp_backend import _piece, _raise_on_error, _usage
from tabmem.llm.openai_http import reply_text


def test_usage_counts_cached_prompt_tokens_as_prompt_but_not_as_evaluated():
    usage = _usage({"cache_n": 1900, "prompt_n": 24, "predicted_n": 7})
    assert usage == {"prompt_tokens": 1924, "completion_tokens": 7, "evaluated_tokens": 31}
    assert _usage({}) == {"prompt_tokens": 0, "completion_tokens": 0, "evaluated_tokens": 0}


def test_a_refused_request_raises_with_the_engine_message():
    with pytest.raises(ProviderError, match="refused the request: the prompt is too long"):
        _raise_on_error({"error": {"code": 400, "message": "the prompt is too long"}}, "m")
    with pytest.raises(ProviderError, match="refused the request: bad JSON"):
        _raise_on_error({"code": 500, "type": "server_error", "message": "bad JSON"}, "m")
    _raise_on_error({"choices": []}, "m")


def test_chat_and_plain_answers_read_their_text():
    """The engine's replies have the OpenAI shape the HTTP client reads (``reply_text``)."""
    assert reply_text("chat", {"choices": [{"message": {"content": "5.1,3.5"}}]}) == "5.1,3.5"
    assert reply_text("complete", {"choices": [{"text": "Iris"}]}) == "Iris"
    assert reply_text("chat", {"choices": [{"message": {"content": None}}]}) == ""


def test_a_piece_given_as_bytes_is_decoded():
    assert _piece("osa") == "osa"
    assert _piece([0xC3, 0xA9]) == "é"
    assert _piece([0xE2]) == "\ufffd"
