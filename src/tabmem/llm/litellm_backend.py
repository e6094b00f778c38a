"""API providers through litellm; self-hosted OpenAI-compatible servers over plain HTTP.

Retries happen in ``tabmem.llm.client`` only. A model named ``openai/<name>`` or
``text-completion-openai/<name>`` with an ``api_base`` (vLLM, llama.cpp server, Ollama, the
oracles) is reached directly by ``tabmem.llm.openai_http`` (``transport="auto"``): such servers
speak OpenAI's API as-is, and the direct path costs about a seventh of litellm's CPU per request.
Everything else goes through litellm with ``num_retries=0`` and, for OpenAI-compatible
providers, one ``openai.OpenAI`` client per backend built with ``max_retries=0`` (the SDK
retries twice by default), so a server sees one request per try either way; that client also
keeps connections alive (without it litellm builds a new client, and TLS context, for every
plain completion).

Errors come out in three kinds: ``TransientProviderError`` (timeout, 429, 5xx, dropped
connection, an unreadable reply: worth retrying, with the server's Retry-After), ``ProviderError``
(a wrong key, a model the server does not have: no later query can succeed either) and
``QueryError`` (this one query was refused). Their messages never hold the API key.

The endpoint is resolved once (``tabmem.llm.endpoint``: config, environment, provider default),
handed to litellm and the SDK explicitly and kept in the identity, so the cache never serves one
endpoint's answers as another's. Each answer's reported token usage is kept for the caller
(``take_usage``, per thread, as workers answer concurrently).

With ``stream=True`` a request with a stop rule (``tabmem.llm.stopping``) goes over the direct
path as a stream, closed as soon as the answer's score is settled, so the server stops
generating; through litellm the whole answer is generated and then cut by the client.

A model whose config declares ``prompt_logprobs`` (``echo`` or ``vllm``: the reply shape its
server gives, ``tabmem.llm.openai_http``) scores text like the transformers backend: context
and text tokenized apart by the server's tokenizer, the context after BOS, the joined token ids
sent as the prompt, and the text's own tokens' log-probabilities kept. Without it the model
scores nothing (``supports_logprobs`` is false) and the likelihood tests say so.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabmem.errors import ConfigError, ProviderError, TransientProviderError
from tabmem.llm.base import BaseBackend, GenerationParams, Message, Request, after_bos
from tabmem.llm.batch import AnthropicBatchClient, BatchClient, anthropic_params
from tabmem.llm.endpoint import resolve_endpoint
from tabmem.llm.litellm_logs import say_once
from tabmem.llm.openai_http import SCORING, OpenAICompatibleClient, QueryError, reported_usage
from tabmem.llm.reasoning import Reasoning, joined

# httpx logs every request at INFO (a line per query of a grid, in Hydra's job log too)
for _chatty in ("httpx", "httpcore"):
    logging.getLogger(_chatty).setLevel(logging.WARNING)

if TYPE_CHECKING:
    from tabmem.llm.backends import BuildContext

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

OPENAI_PROVIDERS = ("openai", "text-completion-openai")
FATAL_STATUS = (401, 403, 404)
TRANSPORTS = ("auto", "litellm")

__all__ = ["LiteLLMBackend", "QueryError", "retry_after_seconds"]


def retry_after_seconds(
    headers: Mapping[str, str] | None, now: float | None = None
) -> float | None:
    """The wait a server asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an
    HTTP date; None when it asks for none."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    try:
        if "retry-after-ms" in lower:
            return max(0.0, float(lower["retry-after-ms"]) / 1000)
        if "retry-after" in lower:
            return max(0.0, float(lower["retry-after"]))
    except ValueError:
        pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def _error_headers(exc: Exception) -> Mapping[str, str] | None:
    """The response headers litellm kept with its exception (it does not put them on
    ``exc.response``), else those of the response itself."""
    headers = getattr(exc, "litellm_response_headers", None)
    if not headers:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers or None


def missing_credentials(
    name: str, api_base: str | None, api_base_env: str | None, api_key_env: str | None
) -> list[str]:
    """One sentence for each thing model ``name`` reads from the environment and does not find
    there: its server's URL (``api_base_env``, where the config gives no ``api_base``) and its
    API key (``api_key_env``). The backend raises the first; the preflight says them all."""
    missing = []
    if api_base_env and not api_base and not os.environ.get(api_base_env):
        missing.append(
            f"Model '{name}' needs the server URL in ${api_base_env}; "
            f"export {api_base_env}=http://host:port/v1 or choose another model."
        )
    if api_key_env and not os.environ.get(api_key_env):
        missing.append(
            f"Model '{name}' needs an API key in ${api_key_env}; export it, or run "
            "a local model such as model=smollm2-135m."
        )
    return missing


class LiteLLMBackend(BaseBackend):
    """Chat and plain completion through litellm, with our own retries and cache around it.

    ``api_key_env`` / ``api_base_env`` name environment variables; they are read here,
    once, and a missing one stops the cell before the first query (unless
    ``require_credentials`` is false: a dry run sends nothing, so it needs no key).
    ``drop_params`` lets litellm leave out what a provider's model refuses (a reasoning model's
    temperature); the direct path sends every parameter, as self-hosted servers take them.
    ``prompt_caching`` (``auto``: Anthropic's models; ``on``; ``off``) marks a chat's shared
    prefix, everything before its last message, with ``cache_control`` so that the provider
    caches it; OpenAI caches long prefixes by itself. ``prompt_logprobs`` (``echo`` or
    ``vllm``) says the server scores prompts (module docstring); ``bos_token`` is the text of
    the token a scored context starts with where the server's tokenizer adds none to a prompt
    (SmolLM2's: ``<|im_start|>``, as the transformers backend reads it); up to
    ``max_concurrency`` texts are scored at once.
    """

    moments_unavailable = (
        "a server returns the log-probabilities of a few tokens at each position, not its "
        "whole distribution"
    )

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
        transport: str = "auto",
        require_credentials: bool = True,
        stream: bool = False,
        drop_params: bool = False,
        prompt_caching: str = "auto",
        prompt_logprobs: str | None = None,
        bos_token: str | None = None,
        max_concurrency: int = 1,
    ) -> None:
        if prompt_logprobs is not None:
            scoring_problem(name, prompt_logprobs, completion_model or model, transport)
            if not api_base and not api_base_env:
                raise ConfigError(
                    f"Model '{name}' declares prompt_logprobs, which its own server gives: set "
                    "api_base or api_base_env to that server's URL."
                )
        if prompt_caching not in ("auto", "on", "off"):
            raise ConfigError(
                f"Model '{name}' has prompt_caching '{prompt_caching}'; use auto, on or off."
            )
        if transport not in TRANSPORTS:
            raise ConfigError(
                f"Model '{name}' has transport '{transport}'; use one of {', '.join(TRANSPORTS)}."
            )
        missing = missing_credentials(name, api_base, api_base_env, api_key_env)
        if missing and require_credentials:
            raise ProviderError(missing[0])
        if api_base_env and not api_base:
            api_base = os.environ.get(api_base_env)
        self._api_key: str | None = os.environ.get(api_key_env) if api_key_env else None
        self.name = name
        self.model = model
        self.completion_model = completion_model or model
        self.endpoint = resolve_endpoint(model, api_base)
        self.completion_endpoint = (
            self.endpoint
            if self.completion_model == model
            else resolve_endpoint(self.completion_model, api_base)
        )
        self.api_base = self.endpoint.explicit
        self._bases = {
            model: self.api_base,
            self.completion_model: self.completion_endpoint.explicit,
        }
        self._usage = threading.local()
        self.timeout = timeout
        self.extra_params = dict(extra_params or {})
        self.stream = stream
        self.drop_params = drop_params
        self.mark_prefix = prompt_caching == "on" or (
            prompt_caching == "auto" and self._provider == "anthropic"
        )
        self.prompt_logprobs = prompt_logprobs
        self.supports_logprobs = prompt_logprobs is not None
        self.batch_size = max(1, max_concurrency)  # texts a scoring request holds
        self._bos_token = bos_token
        self._bos_id: int | None = None
        self._dry_run = not require_credentials
        self._openai_client: Any = None
        self._litellm: Any = None
        self._direct: OpenAICompatibleClient | None = None
        if transport == "auto" and self.api_base:
            self._direct = OpenAICompatibleClient(
                self.api_base, self._api_key, timeout, name, retry_after_seconds
            )
        # "endpoint" replaces the config's "api_base" of earlier identities, so entries cached
        # before endpoints were resolved (maybe from a server named only by the environment)
        # never match again.
        self.identity = {
            "provider": "litellm",
            "model": model,
            "completion_model": self.completion_model,
            "endpoint": self.endpoint.url,
            "completion_endpoint": self.completion_endpoint.url,
        }
        if self.extra_params:
            self.identity["extra_params"] = json.dumps(self.extra_params, sort_keys=True)
        if bos_token:
            self.identity["bos_token"] = bos_token

    def _body(self, params: GenerationParams) -> dict[str, Any]:
        """The generation parameters as OpenAI's API names them."""
        body: dict[str, Any] = {
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
            **self.extra_params,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        return body

    def _common(self, params: GenerationParams, model: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": model,
            **self._body(params),
            "timeout": self.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        if self.drop_params:  # reasoning models refuse temperature and top_p; litellm drops them
            kwargs["drop_params"] = True
        if self._bases.get(model):
            kwargs["api_base"] = self._bases[model]
        kwargs["api_key"] = self._api_key or "unused"
        client = self._client_for(model)
        if client is not None:
            kwargs["client"] = client
        return kwargs

    def _lite(self) -> Any:
        """litellm, imported on first use (the direct path never needs it)."""
        if self._litellm is None:
            import litellm

            litellm.suppress_debug_info = True
            logging.getLogger("LiteLLM").setLevel(logging.WARNING)
            say_once()
            self._litellm = litellm
        return self._litellm

    def _client_for(self, model: str) -> Any:
        """The shared ``openai.OpenAI`` client (no SDK retries) for OpenAI-compatible providers."""
        try:
            provider = self._lite().get_llm_provider(model)[1]
        except Exception:
            return None
        if provider not in OPENAI_PROVIDERS:
            return None
        if self._openai_client is None:
            import openai

            self._openai_client = openai.OpenAI(
                api_key=self._api_key or "unused",
                base_url=self.api_base or None,
                timeout=self.timeout,
                max_retries=0,
            )
        return self._openai_client

    def _direct_name(self, model: str) -> str | None:
        """The server's model name when ``model`` goes over the direct path, else None."""
        if self._direct is None:
            return None
        provider, _, served = model.partition("/")
        return served if provider in OPENAI_PROVIDERS and served else None

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        served = self._direct_name(self.model)
        if served is not None and self._direct is not None:
            body = {"model": served, "messages": messages, **self._body(params)}
            if self.stream and params.stop_rule is not None:
                return self._answered(
                    *self._direct.stream("chat/completions", body, params.stop_rule)
                )
            text, usage = self._direct.chat(served, messages, self._body(params))
            return self._answered(text, usage)
        lt = self._lite()
        sent = with_cached_prefix(messages) if self.mark_prefix else messages
        response = self._call(lt.completion, messages=sent, **self._common(params, self.model))
        message = response.choices[0].message
        thoughts = getattr(message, "reasoning_content", None) or ""
        return self._answered(joined(message.content or "", thoughts), response)

    def complete(self, prompt: str, params: GenerationParams) -> str:
        served = self._direct_name(self.completion_model)
        if served is not None and self._direct is not None:
            body = {"model": served, "prompt": prompt, **self._body(params)}
            if self.stream and params.stop_rule is not None:
                return self._answered(*self._direct.stream("completions", body, params.stop_rule))
            text, usage = self._direct.complete(served, prompt, self._body(params))
            return self._answered(text, usage)
        response = self._call(
            self._lite().text_completion,
            prompt=prompt,
            **self._common(params, self.completion_model),
        )
        return self._answered(response.choices[0].text or "", response)

    def logprobs(self, text: str, context: str = "") -> list[float] | None:
        return self.logprobs_batch([(context, text)])[0]

    def logprobs_batch(self, items: list[tuple[str, str]]) -> list[list[float]]:
        """Log-probability of every token of each text, read after its context (a model that
        declares ``prompt_logprobs``). As in the transformers backend, context and text are
        tokenized apart (by the server's tokenizer, the context with its special tokens and
        after BOS) and the text's own tokens are scored; without BOS and without context the
        text's first token has no prediction and is not scored. The strings are tokenized
        concurrently, then every prompt goes in one completion request."""
        if self._dry_run:
            raise QueryError("not sent: a dry run sends no request")
        client, served = self._scoring_client()
        strings = {(c, True) for c, _ in items} | {(t, False) for _, t in items if t}
        with ThreadPoolExecutor(max_workers=max(1, min(self.batch_size, len(strings)))) as pool:
            found = pool.map(lambda s: client.tokenize(served, *s), strings)
            ids = dict(zip(strings, found, strict=True))
        bos = self._bos(client, served)
        pairs = [(after_bos(ids[(c, True)], bos), ids[(t, False)] if t else []) for c, t in items]
        asked = [context + text for context, text in pairs if text]
        scored = client.prompt_logprobs(served, asked, str(self.prompt_logprobs)) if asked else []
        values = iter(scored)
        return [next(values)[max(len(context), 1) - 1 :] if text else [] for context, text in pairs]

    def _scoring_client(self) -> tuple[OpenAICompatibleClient, str]:
        """The direct client and the server's name of the completion model, which score text."""
        served = self._direct_name(self.completion_model)
        if not self.supports_logprobs or self._direct is None or served is None:
            raise ProviderError(
                f"Model '{self.name}' scores no text: its config declares no prompt_logprobs."
            )
        return self._direct, served

    def _bos(self, client: OpenAICompatibleClient, served: str) -> int | None:
        """The id of the configured ``bos_token`` (asked of the server once), or None."""
        if self._bos_token and self._bos_id is None:
            ids = client.tokenize(served, self._bos_token, False)
            if len(ids) != 1:
                raise ConfigError(
                    f"Model '{self.name}' has bos_token '{self._bos_token}', which its server "
                    f"reads as {len(ids)} tokens; give the text of its tokenizer's BOS token."
                )
            self._bos_id = ids[0]
        return self._bos_id

    @staticmethod
    def credentials_problems(cfg: Mapping[str, Any]) -> list[str]:
        """What a ``backend: litellm`` model config needs from the environment and does not
        find there, one sentence each (checked before a grid starts: ``tabmem.preflight``)."""
        return missing_credentials(
            str(cfg["name"]), cfg.get("api_base"), cfg.get("api_base_env"), cfg.get("api_key_env")
        )

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], ctx: BuildContext) -> LiteLLMBackend:
        """The backend a ``backend: litellm`` model config describes; a reasoning model's
        ``reasoning_effort`` goes to the provider, and litellm drops what it refuses."""
        reasoning = Reasoning.of_model(cfg)
        extra = dict(cfg.get("extra_params") or {})
        if reasoning.effort:
            extra["reasoning_effort"] = reasoning.effort
        return cls(
            model=cfg["litellm_model"],
            completion_model=cfg.get("completion_model"),
            name=cfg["name"],
            api_base=cfg.get("api_base"),
            api_base_env=cfg.get("api_base_env"),
            api_key_env=cfg.get("api_key_env"),
            timeout=float(cfg.get("timeout", 60)),
            extra_params=extra,
            require_credentials=ctx.require_credentials,
            stream=bool(cfg.get("stream", False)),
            drop_params=reasoning.active,
            prompt_caching=str(cfg.get("prompt_caching", "auto")),
            prompt_logprobs=cfg.get("prompt_logprobs"),
            bos_token=cfg.get("bos_token"),
            max_concurrency=int(cfg.get("max_concurrency") or 1),
        )

    @property
    def _provider(self) -> str:
        """The provider a litellm model name names (``openai`` for a bare name)."""
        if self.model.startswith("claude"):
            return "anthropic"
        return self.model.partition("/")[0] if "/" in self.model else "openai"

    def batch_job(self, request: Request, params: GenerationParams) -> tuple[str, dict[str, Any]]:
        """``request`` as a Batch API job: its kind and the body OpenAI's API takes."""
        body = self._body(params)
        if request.messages is not None:
            chat = {"model": _served(self.model), "messages": [*request.messages], **body}
            return "chat", anthropic_params(chat) if self._provider == "anthropic" else chat
        prompt = request.prompt or ""
        return "complete", {"model": _served(self.completion_model), "prompt": prompt, **body}

    def batch_client(self, state_dir: Path, poll_seconds: float) -> BatchClient:
        """A Batch API client for this model's endpoint: Anthropic's Message Batches for its
        models, else OpenAI's protocol."""
        if self._provider == "anthropic" and self.endpoint.url:
            return AnthropicBatchClient(
                self.endpoint.url, self._api_key, state_dir, poll_seconds, timeout=self.timeout
            )
        if self._provider not in OPENAI_PROVIDERS or not self.endpoint.url:
            raise ConfigError(
                f"batch=true speaks OpenAI's and Anthropic's Batch APIs; model '{self.name}' "
                f"({self.model}) is served by neither. Run it without batch=true."
            )
        return BatchClient(
            self.endpoint.url, self._api_key, state_dir, poll_seconds, timeout=self.timeout
        )

    def _answered(self, text: str, reply: Any) -> str:
        """Keep the usage of this thread's answer for ``take_usage``; return the text."""
        usage = reply if isinstance(reply, dict) else reported_usage(getattr(reply, "usage", None))
        self._usage.value = usage
        return text

    def take_usage(self) -> dict[str, int]:
        """The token usage reported for this thread's last answer (then forgotten)."""
        usage = getattr(self._usage, "value", None) or {}
        self._usage.value = None
        return usage

    def _call(self, fn: Any, **kwargs: Any) -> Any:
        """Call litellm; sort its exceptions into transient, fatal and per-query ones."""
        lt = self._lite()
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
            raise TransientProviderError(self._short(exc), _retry_after(exc)) from exc
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and status >= 500:
                raise TransientProviderError(self._short(exc), _retry_after(exc)) from exc
            if status in FATAL_STATUS:
                raise ProviderError(
                    f"Model '{self.name}' was refused by its provider ({self._short(exc)}); "
                    "check its API key, model name and api_base."
                ) from exc
            raise QueryError(self._short(exc)) from exc

    def _short(self, exc: Exception) -> str:
        """The exception's type and first line, with the API key masked out."""
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        text = f"{type(exc).__name__}: {first}"
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text

    def close(self) -> None:
        """Release the HTTP clients' connections."""
        if self._direct is not None:
            self._direct.close()
        if self._openai_client is not None:
            self._openai_client.close()
            self._openai_client = None


def scoring_problem(name: str, shape: str, completion_model: str, transport: str) -> None:
    """Stop a model that declares ``prompt_logprobs`` where its server cannot be asked for them:
    an unknown reply shape, or plain completions that do not go straight to an
    OpenAI-compatible server (``text-completion-openai/<served name>``, transport ``auto``)."""
    if shape not in SCORING:
        raise ConfigError(
            f"Model '{name}' has prompt_logprobs '{shape}'; use {' or '.join(SCORING)}."
        )
    if transport != "auto" or completion_model.partition("/")[0] not in OPENAI_PROVIDERS:
        raise ConfigError(
            f"Model '{name}' declares prompt_logprobs, which are read from a self-hosted "
            "OpenAI-compatible server directly: name its completion_model "
            "text-completion-openai/<served name> and leave transport at auto."
        )


def with_cached_prefix(messages: list[Message]) -> list[dict[str, Any]]:
    """``messages`` with the last message before the question marked for the provider's
    prompt cache (Anthropic's ``cache_control``): the system prompt and few-shot examples,
    identical across a test's queries, are then read from the cache at a tenth of the price."""
    if len(messages) < 2:
        return list(messages)
    marked: list[dict[str, Any]] = [dict(m) for m in messages]
    text = str(marked[-2]["content"])
    block = {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
    marked[-2]["content"] = [block]
    return marked


def _served(model: str) -> str:
    """The provider's name of a litellm model name (``openai/gpt-4o`` → ``gpt-4o``)."""
    return model.partition("/")[2] if "/" in model else model


def _retry_after(exc: Exception) -> float | None:
    """The Retry-After of a provider's error response, in seconds, if it sent one."""
    return retry_after_seconds(_error_headers(exc))
