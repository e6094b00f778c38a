"""A lean client for self-hosted OpenAI-compatible servers (vLLM, llama.cpp, Ollama, the oracles).

Such servers speak OpenAI's API as-is, so there is nothing for litellm to translate; going
straight to HTTP costs about 1 ms of CPU per request instead of about 7 (litellm plus the
OpenAI SDK), which is what lets 16 or 64 concurrent workers keep a fast server busy on a small
machine. One pooled ``httpx.Client`` per model keeps connections alive; it never retries (the
caller does), and its errors are sorted as litellm's are: ``TransientProviderError`` (timeout,
dropped connection, 408/409/429, 5xx, an unreadable reply), ``ProviderError`` (401/403/404: no
query can succeed) and ``QueryError`` (this one request was refused).

``stream`` asks for the answer as server-sent events and reads them only until a stop rule
says the score is settled; leaving the stream then closes the connection, which tells the
server to stop generating. Usage is what the server reported in the events read (often none).

``tokenize`` and ``prompt_logprobs`` score a prompt on a vLLM server (read in vLLM's
``vllm/entrypoints/openai/completion/protocol.py`` and ``serving.py`` and
``vllm/entrypoints/serve/tokenize/``): ``POST /tokenize`` (at the server's root, beside
``/v1``) takes ``prompt`` and ``add_special_tokens`` and answers ``tokens``, the ids; ``POST
/v1/completions`` takes a ``prompt`` of token ids, or a list of such prompts (one choice each,
in order, ``index`` counting from 0). Two reply shapes carry the prompt's log-probabilities:

- ``echo`` (OpenAI's legacy parameter, which vLLM keeps): with ``echo: true`` and ``logprobs:
  k``, ``choices[i].logprobs`` holds ``tokens`` (each token's text), ``token_logprobs`` (one
  per token: null for the prompt's first, which nothing predicts), ``top_logprobs`` (null,
  then up to k + 1 ``{token text: logprob}``) and ``text_offset`` (where each token's text
  starts in the echoed text); the prompt's tokens come first, then the generated ones;
- ``vllm`` (vLLM's extra ``prompt_logprobs: k``): ``choices[i].prompt_logprobs`` is one entry
  per prompt token, null for the first, else ``{token id (a string in JSON): {logprob, rank,
  decoded_token}}`` holding the prompt's own token and the k most likely.

Either way the prompt's tokens are the ids sent, so a text's log-probabilities are found by
counting tokens; text offsets count the characters of tokens decoded one by one, which need not
add up to the text (a character split across tokens). vLLM runs one generation step even for
``max_tokens`` 0 with ``echo`` and needs ``max_tokens`` >= 1 without it, so one token is asked
for in both shapes; it is not read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tabmem.errors import ProviderError, TransientProviderError
from tabmem.llm.reasoning import joined
from tabmem.llm.stopping import StopRule

RETRY_STATUS = (408, 409, 429)
FATAL_STATUS = (401, 403, 404)
STREAMED = {"stream": True, "stream_options": {"include_usage": True}}
"""What turns a request into a stream that ends with its token usage."""
SCORING = {
    "echo": {"echo": True, "logprobs": 1},
    "vllm": {"prompt_logprobs": 1},
}
"""What a completion request adds to get its prompt's log-probabilities, by reply shape (k = 1:
the prompt's own token comes with at most one other)."""
POOL = httpx.Limits(max_connections=256, max_keepalive_connections=256)


class QueryError(Exception):
    """One query refused by the provider (a bad request, an unreadable answer); the key is
    never in the message."""


class OpenAICompatibleClient:
    """``chat`` and ``complete`` against ``api_base`` (``…/v1``), returning the reply's text and
    the token usage the server reported."""

    def __init__(
        self,
        api_base: str,
        api_key: str | None,
        timeout: float,
        name: str,
        retry_after: Any,
    ) -> None:
        self.name = name
        self._key = api_key
        self._retry_after = retry_after
        headers = {"Authorization": f"Bearer {api_key or 'unused'}"}
        self._http = httpx.Client(
            base_url=api_base.rstrip("/") + "/", timeout=timeout, headers=headers, limits=POOL
        )
        self._root = server_root(api_base)

    def chat(
        self, model: str, messages: list[dict[str, str]], body: dict[str, Any]
    ) -> tuple[str, dict[str, int]]:
        reply = self._post("chat/completions", {"model": model, "messages": messages, **body})
        return reply_text("chat", reply), reported_usage(reply.get("usage"))

    def complete(self, model: str, prompt: str, body: dict[str, Any]) -> tuple[str, dict[str, int]]:
        reply = self._post("completions", {"model": model, "prompt": prompt, **body})
        return reply_text("complete", reply), reported_usage(reply.get("usage"))

    def tokenize(self, model: str, text: str, special: bool) -> list[int]:
        """``text``'s token ids by the server's tokenizer (vLLM's ``/tokenize``), with the special
        tokens it adds to a prompt (BOS) where ``special``."""
        body = {"model": model, "prompt": text, "add_special_tokens": special}
        tokens = self._post(f"{self._root}/tokenize", body).get("tokens")
        if not isinstance(tokens, list) or not all(_is_int(t) for t in tokens):
            raise TransientProviderError("unreadable reply (no token ids)")
        return tokens

    def prompt_logprobs(
        self, model: str, prompts: list[list[int]], shape: str
    ) -> list[list[float]]:
        """Per prompt (token ids), the log-probability of each of its tokens after the first,
        from one completion request in reply shape ``shape`` (``SCORING``)."""
        body = {"model": model, "prompt": prompts, "max_tokens": 1, "temperature": 0.0}
        reply = self._post("completions", {**body, **SCORING[shape]})
        return read_prompt_logprobs(reply, prompts, shape)

    def stream(self, path: str, body: dict[str, Any], rule: StopRule) -> tuple[str, dict[str, int]]:
        """POST ``body`` to ``path`` ("chat/completions" or "completions") as a stream; read
        until ``rule`` settles the text or the server ends, then close the stream. The usage
        is asked for (``include_usage``: OpenAI's servers send it in a last event); a stream
        closed before its end reports none."""
        text, thoughts, usage = "", "", None
        with (
            self._transport_errors(),
            self._http.stream("POST", path, json={**body, **STREAMED}) as response,
        ):
            if response.status_code != 200:
                response.read()
                self._raise_for(response)
            for event in _events(response.iter_lines()):
                usage = event.get("usage") or usage
                choices = event.get("choices") or []
                if choices and isinstance(choices[0], dict):
                    delta = choices[0].get("delta")
                    piece = delta.get("content") if isinstance(delta, dict) else None
                    text += _text(piece if piece is not None else choices[0].get("text"))
                    thoughts += _text(_thoughts(delta)) if isinstance(delta, dict) else ""
                if rule.end(text) is not None:
                    break
        return joined(text, thoughts), reported_usage(usage)

    @contextmanager
    def _transport_errors(self) -> Iterator[None]:
        """A timeout or a failed connection, as a transient error (the key masked)."""
        try:
            yield
        except httpx.TimeoutException as exc:
            raise TransientProviderError(f"timed out: {type(exc).__name__}") from exc
        except httpx.TransportError as exc:
            raise TransientProviderError(f"connection failed: {self._mask(str(exc))}") from exc

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._transport_errors():
            response = self._http.post(path, json=body)
        if response.status_code != 200:
            self._raise_for(response)
        try:
            reply = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TransientProviderError(
                f"unreadable reply ({len(response.content)} bytes)"
            ) from exc
        if not isinstance(reply, dict):
            raise TransientProviderError("unreadable reply (not a JSON object)")
        return reply

    def _raise_for(self, response: httpx.Response) -> None:
        status = response.status_code
        text = f"HTTP {status}: {self._mask(_error_message(response))}"
        if status in RETRY_STATUS or status >= 500:
            raise TransientProviderError(text, self._retry_after(response.headers))
        if status in FATAL_STATUS:
            raise ProviderError(
                f"Model '{self.name}' was refused by its server ({text}); "
                "check its API key, model name and api_base."
            )
        raise QueryError(text)

    def _mask(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def close(self) -> None:
        self._http.close()


def reply_text(kind: str, reply: dict[str, Any]) -> str:
    """The text of a chat (``kind`` "chat") or plain completion reply; a reasoning model's
    separate thoughts joined before it as a think block."""
    choice = _first_choice(reply)
    if kind != "chat":
        return _text(choice.get("text"))
    message = choice.get("message") or {}
    return joined(_text(message.get("content")), _text(_thoughts(message)))


def server_root(api_base: str) -> str:
    """The server's root URL: ``api_base`` without its trailing ``/v1`` (vLLM serves
    ``/tokenize`` there, beside the OpenAI routes)."""
    return api_base.rstrip("/").removesuffix("/v1")


def read_prompt_logprobs(
    reply: dict[str, Any], prompts: list[list[int]], shape: str
) -> list[list[float]]:
    """Per prompt of a completion request, the log-probability of each of its tokens after the
    first (its first has no prediction), read from the reply's choices in shape ``shape``
    (``echo`` or ``vllm``; see the module's docstring). A reply that does not hold one number
    per prompt token is unreadable (a transient error, as for any other unreadable reply)."""
    choices = reply.get("choices")
    if not isinstance(choices, list) or len(choices) != len(prompts):
        raise TransientProviderError(
            f"unreadable reply ({len(choices) if isinstance(choices, list) else 'no'} choices "
            f"for {len(prompts)} prompts)"
        )
    if not all(isinstance(c, dict) for c in choices):
        raise TransientProviderError("unreadable reply (a choice is not an object)")
    ordered = sorted(choices, key=lambda c: c.get("index") if _is_int(c.get("index")) else 0)
    read = _echoed if shape == "echo" else _listed
    return [read(choice, ids) for choice, ids in zip(ordered, prompts, strict=True)]


def _echoed(choice: dict[str, Any], ids: list[int]) -> list[float]:
    """The prompt's log-probabilities from ``logprobs.token_logprobs`` of an echoed choice: its
    first ``len(ids)`` entries are the prompt's (generated tokens follow)."""
    logprobs = choice.get("logprobs")
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    if not isinstance(values, list) or len(values) < len(ids):
        raise TransientProviderError("unreadable reply (no log-probability for each prompt token)")
    return [_logprob(v) for v in values[1 : len(ids)]]


def _listed(choice: dict[str, Any], ids: list[int]) -> list[float]:
    """The prompt's log-probabilities from vLLM's ``prompt_logprobs`` (one entry per prompt
    token, keyed by token id): each position's entry for the prompt's own token."""
    entries = choice.get("prompt_logprobs")
    if not isinstance(entries, list) or len(entries) != len(ids):
        raise TransientProviderError("unreadable reply (no prompt_logprobs for each prompt token)")
    values = []
    for token, entry in zip(ids[1:], entries[1:], strict=True):
        found = entry.get(str(token)) if isinstance(entry, dict) else None
        if not isinstance(found, dict):
            raise TransientProviderError(
                f"unreadable reply (prompt token {token} is not among its position's logprobs)"
            )
        values.append(_logprob(found.get("logprob")))
    return values


def _logprob(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TransientProviderError("unreadable reply (a log-probability is not a number)")
    return float(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def reported_usage(usage: Any) -> dict[str, int]:
    """``prompt_tokens`` and ``completion_tokens`` as the provider reported them (a dict or
    litellm's ``Usage``), and where it reports them: ``reasoning_tokens`` (a reasoning model's
    thoughts), ``cache_read_tokens`` and ``cache_write_tokens`` (prompt tokens its prompt cache
    served, as OpenAI's ``cached_tokens`` or Anthropic's ``cache_read_input_tokens``, or
    stored); empty when it reported none."""
    if usage is None:
        return {}
    counts = {name: _field(usage, name) for name in ("prompt_tokens", "completion_tokens")}
    if not any(isinstance(v, int) for v in counts.values()):
        return {}
    reported = {name: int(v) if isinstance(v, int) else 0 for name, v in counts.items()}
    extra = {
        "reasoning_tokens": _field(_field(usage, "completion_tokens_details"), "reasoning_tokens"),
        "cache_read_tokens": _field(_field(usage, "prompt_tokens_details"), "cached_tokens")
        or _field(usage, "cache_read_input_tokens"),
        "cache_write_tokens": _field(usage, "cache_creation_input_tokens"),
    }
    reported.update({k: v for k, v in extra.items() if isinstance(v, int) and v > 0})
    return reported


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a dict, ``value.name`` of an object, None when absent."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def _thoughts(message: dict[str, Any]) -> Any:
    """A reasoning model's thoughts beside its answer (``reasoning_content`` in vLLM's and
    DeepSeek's replies, ``reasoning`` in others'); None when there are none."""
    found = message.get("reasoning_content")
    return found if found is not None else message.get("reasoning")


def _events(lines: Any) -> Any:
    """The JSON objects of a server-sent event stream, up to ``data: [DONE]``."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except json.JSONDecodeError as exc:
            raise TransientProviderError(f"unreadable stream event ({len(data)} bytes)") from exc
        if not isinstance(event, dict):
            raise TransientProviderError("unreadable stream event (not a JSON object)")
        yield event


def _first_choice(reply: dict[str, Any]) -> dict[str, Any]:
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise TransientProviderError("unreadable reply (no choices)")
    return choices[0]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TransientProviderError("unreadable reply (text is not a string)")
    return value


def _error_message(response: httpx.Response) -> str:
    """The server's error message (OpenAI's ``error.message``), else the start of its body."""
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = None
    return str(message or response.text[:200] or "no message").splitlines()[0][:300]
