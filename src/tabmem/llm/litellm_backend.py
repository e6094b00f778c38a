"""API providers and any OpenAI-compatible server (vLLM, llama.cpp server, Ollama) via litellm."""

from __future__ import annotations

import os
from typing import Any

from tabmem.errors import ProviderError, TransientProviderError
from tabmem.llm.base import GenerationParams, Message

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _retry_after(exc: Exception) -> float | None:
    """The Retry-After header of a provider's error response, in seconds, if it sent one."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class LiteLLMBackend:
    """Chat and plain completion through litellm, with our own retries and cache around it.

    ``api_key_env`` / ``api_base_env`` name environment variables; they are read here,
    once, and a missing one stops the cell before the first query.
    """

    def __init__(
        self,
        model: str,
        name: str,
        api_base: str | None = None,
        api_base_env: str | None = None,
        api_key_env: str | None = None,
        completion_model: str | None = None,
        timeout: float = 60.0,
        extra_params: dict[str, Any] | None = None,
    ) -> None:
        if api_base_env and not api_base:
            api_base = os.environ.get(api_base_env)
            if not api_base:
                raise ProviderError(
                    f"Model '{name}' needs the server URL in ${api_base_env}; "
                    f"export {api_base_env}=http://host:port/v1 or choose another model."
                )
        self._api_key: str | None = None
        if api_key_env:
            self._api_key = os.environ.get(api_key_env)
            if not self._api_key:
                raise ProviderError(
                    f"Model '{name}' needs an API key in ${api_key_env}; export it, or run "
                    "a local model such as model=smollm2-135m."
                )
        import litellm

        self._litellm = litellm
        self.model = model
        self.completion_model = completion_model or model
        self.api_base = api_base
        self.timeout = timeout
        self.extra_params = dict(extra_params or {})
        self.identity = {"provider": "litellm", "model": model, "api_base": api_base or ""}

    def _common(self, params: GenerationParams) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
            "timeout": self.timeout,
            "num_retries": 0,
            **self.extra_params,
        }
        if params.stop:
            kwargs["stop"] = list(params.stop)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        kwargs["api_key"] = self._api_key or "unused"
        return kwargs

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        response = self._call(
            self._litellm.completion, model=self.model, messages=messages, **self._common(params)
        )
        return response.choices[0].message.content or ""

    def complete(self, prompt: str, params: GenerationParams) -> str:
        response = self._call(
            self._litellm.text_completion,
            model=self.completion_model,
            prompt=prompt,
            **self._common(params),
        )
        return response.choices[0].text or ""

    def _call(self, fn: Any, **kwargs: Any) -> Any:
        lt = self._litellm
        transient = (
            lt.Timeout,
            lt.RateLimitError,
            lt.APIConnectionError,
            lt.InternalServerError,
            lt.ServiceUnavailableError,
        )
        try:
            return fn(**kwargs)
        except transient as exc:
            raise TransientProviderError(_short(exc), retry_after=_retry_after(exc)) from exc
        except lt.APIError as exc:
            if getattr(exc, "status_code", 0) and exc.status_code >= 500:
                raise TransientProviderError(_short(exc), retry_after=_retry_after(exc)) from exc
            raise

    def count_tokens(self, text: str) -> int | None:
        return None

    def tokenize(self, text: str) -> list[str] | None:
        return None

    def close(self) -> None:
        """Nothing to release: litellm keeps no per-backend resources."""


def _short(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
