"""The endpoint a litellm model really reaches: config, then environment, then the default.

litellm and the OpenAI SDK read the server's URL from the environment when the config names
none (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``AZURE_API_BASE``, …). A cache key or a run
tag that holds only the config's ``api_base`` would credit a mock server's answers to the real
model, so the backend resolves the endpoint here, in litellm's own order (read off litellm
1.106's ``main.py`` and ``get_llm_provider``), keys its cache on it and passes it on explicitly,
so the endpoint recorded is the one asked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# Providers whose URL litellm resolves in ``main.py`` (not in ``get_llm_provider``): the
# environment variables it reads, in its order, and the URL it falls back to ("" when it has
# none and the SDK reads its own variable, as Azure's does).
PROVIDER_ENV: dict[str, tuple[tuple[str, ...], str]] = {
    "openai": (("OPENAI_BASE_URL", "OPENAI_API_BASE"), "https://api.openai.com/v1"),
    "text-completion-openai": (("OPENAI_BASE_URL", "OPENAI_API_BASE"), "https://api.openai.com/v1"),
    "anthropic": (
        ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"),
        "https://api.anthropic.com/v1/messages",
    ),
    "azure": (("AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"), ""),
    "azure_text": (("AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"), ""),
    "gemini": (("GEMINI_API_BASE",), "https://generativelanguage.googleapis.com"),
    "vertex_ai": (("VERTEXAI_API_BASE", "VERTEX_API_BASE"), ""),
    "openrouter": (("OPENROUTER_API_BASE",), "https://openrouter.ai/api/v1"),
    "ollama": (("OLLAMA_API_BASE",), "http://localhost:11434"),
}


@dataclass(frozen=True)
class Endpoint:
    """Where requests go (``url``; "" when the provider's SDK picks it), and why there."""

    url: str
    source: str

    @property
    def explicit(self) -> str | None:
        """The URL to hand litellm and the SDK, None where they pick their own default."""
        return self.url if self.url and not self.source.endswith("default") else None

    def describe(self) -> str:
        """``url (source)`` for tags and messages."""
        return f"{self.url or '(provider default)'} ({self.source})"


def _provider(model: str) -> tuple[str, str | None]:
    """litellm's provider for ``model`` and the URL ``get_llm_provider`` resolved, if any
    (it does so, environment first, for the OpenAI-compatible providers it knows)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    try:
        _, provider, _, api_base = litellm.get_llm_provider(model)
    except Exception:
        provider, _, _ = model.partition("/")
        return provider, None
    return provider, api_base or None


def resolve_endpoint(model: str, api_base: str | None = None) -> Endpoint:
    """The endpoint litellm will use for ``model``: ``api_base`` when given, else the
    provider's environment variables in litellm's order, else the provider's default."""
    if api_base:
        return Endpoint(api_base, "config")
    provider, resolved = _provider(model)
    if provider not in PROVIDER_ENV and resolved:
        return Endpoint(resolved, f"litellm's {provider} provider")
    names, default = PROVIDER_ENV.get(provider, ((f"{provider.upper()}_API_BASE",), ""))
    for name in names:
        if os.environ.get(name):
            return Endpoint(os.environ[name], f"env {name}")
    return Endpoint(default, f"{provider} default")
