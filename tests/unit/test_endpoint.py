"""The endpoint a litellm model reaches, resolved as litellm does, is in its cache identity."""

from __future__ import annotations

import pytest

from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.cache import cache_key
from tabmem.llm.endpoint import resolve_endpoint
from tabmem.llm.litellm_backend import LiteLLMBackend

URL_VARIABLES = (
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_API_BASE",
    "ANTHROPIC_BASE_URL",
    "AZURE_API_BASE",
    "AZURE_OPENAI_ENDPOINT",
    "GROQ_API_BASE",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in URL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def test_config_then_environment_in_litellms_order_then_default(monkeypatch):
    assert resolve_endpoint("gpt-4").url == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:2/v1")
    assert resolve_endpoint("gpt-4").url == "http://127.0.0.1:2/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert resolve_endpoint("gpt-4").url == "http://127.0.0.1:1/v1"
    assert resolve_endpoint("text-completion-openai/gpt-3.5-turbo-instruct").source == (
        "env OPENAI_BASE_URL"
    )
    assert resolve_endpoint("gpt-4", "http://config/v1").url == "http://config/v1"


def test_other_providers_read_their_own_variables(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-mock/v1")
    assert resolve_endpoint("anthropic/claude-sonnet-4-5").url.startswith("https://api.anthropic")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://anthropic-mock")
    assert resolve_endpoint("anthropic/claude-sonnet-4-5").url == "http://anthropic-mock"
    monkeypatch.setenv("ANTHROPIC_API_BASE", "http://first")
    assert resolve_endpoint("anthropic/claude-sonnet-4-5").url == "http://first"
    assert resolve_endpoint("azure/my-deployment").url == ""
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://sdk.openai.azure.com")
    assert resolve_endpoint("azure/my-deployment").url == "https://sdk.openai.azure.com"
    monkeypatch.setenv("AZURE_API_BASE", "https://litellm.openai.azure.com")
    assert resolve_endpoint("azure/my-deployment").url == "https://litellm.openai.azure.com"
    assert resolve_endpoint("groq/llama-3.1-8b-instant").url == "https://api.groq.com/openai/v1"
    monkeypatch.setenv("GROQ_API_BASE", "http://groq-mock/v1")
    assert resolve_endpoint("groq/llama-3.1-8b-instant").url == "http://groq-mock/v1"


def test_a_change_of_endpoint_in_the_environment_is_a_cache_miss(monkeypatch):
    request = Request(GenerationParams(max_tokens=5), messages=({"role": "user", "content": "hi"},))
    real = LiteLLMBackend("gpt-4", "gpt-4", api_key_env="OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8765/v1")
    mock = LiteLLMBackend("gpt-4", "gpt-4", api_key_env="OPENAI_API_KEY")
    assert real.identity["endpoint"] == "https://api.openai.com/v1"
    assert mock.identity["endpoint"] == "http://127.0.0.1:8765/v1"
    assert cache_key(real.identity, request) != cache_key(mock.identity, request)


def test_entries_cached_before_endpoints_were_resolved_never_match(monkeypatch):
    """The old identity held the config's ``api_base`` ("" here) and no endpoint."""
    request = Request(GenerationParams(max_tokens=5), prompt="hi")
    old = {"provider": "litellm", "model": "gpt-4", "completion_model": "gpt-4", "api_base": ""}
    for url in (None, "http://127.0.0.1:8765/v1"):
        if url:
            monkeypatch.setenv("OPENAI_BASE_URL", url)
        backend = LiteLLMBackend("gpt-4", "gpt-4", api_key_env="OPENAI_API_KEY")
        assert "api_base" not in backend.identity
        assert cache_key(backend.identity, request) != cache_key(old, request)


def test_the_resolved_endpoint_is_the_one_asked(monkeypatch):
    """The SDK reads only OPENAI_BASE_URL; litellm also OPENAI_API_BASE: the backend hands
    the URL it resolved to both, so the URL in the identity is the URL asked."""
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:8766/v1")
    backend = LiteLLMBackend("gpt-4", "gpt-4", api_key_env="OPENAI_API_KEY")
    kwargs = backend._common(GenerationParams(max_tokens=5), "gpt-4")
    assert kwargs["api_base"] == "http://127.0.0.1:8766/v1"
    assert str(kwargs["client"].base_url) == "http://127.0.0.1:8766/v1/"
    assert backend.identity["endpoint"] == "http://127.0.0.1:8766/v1"


def test_a_dry_run_builds_an_api_model_without_its_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(Exception, match="needs an API key"):
        LiteLLMBackend("gpt-4", "gpt-4", api_key_env="OPENAI_API_KEY")
    backend = LiteLLMBackend(
        "gpt-4", "gpt-4", api_key_env="OPENAI_API_KEY", require_credentials=False
    )
    assert backend.identity["endpoint"] == "https://api.openai.com/v1"
