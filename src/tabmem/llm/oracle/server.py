"""An OpenAI-compatible HTTP server for the oracle models, on 127.0.0.1, standard library only.

Serving the oracles over real HTTP lets the harness reach them the way it reaches any model
(litellm with an ``api_base``), so the whole request path is exercised.

Endpoints: ``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST /v1/completions``, with
OpenAI's request and response shapes. ``model`` picks the oracle (``oracle-memorizer``,
``oracle-marginal``, ``oracle-null``, ``oracle-learner``, ``oracle-copula``, ``oracle-forest``,
or a partial memorizer such as ``oracle-partial-random-0.2-s0`` or, answering what it does not
know with the forest or at chance, ``oracle-partial-random-0.2-s0-forest`` and ``…-chance``:
tabmem.llm.oracle.partial). A chat request's
prompt text is its last user message. A name ending in ``+think`` answers as a reasoning model
served without a reasoning parser: a ``<think>`` block of a few lines, then the oracle's answer,
with ``stop`` and ``max_tokens`` applied to the whole text as such a server does; ``+reason``
as one served with a parser: the thoughts in the chat reply's ``reasoning_content`` (and
``completion_tokens_details.reasoning_tokens``), the answer in ``content``. Like OpenAI's
automatic prompt caching, a chat request whose messages before the last were seen before
reports them as ``prompt_tokens_details.cached_tokens`` (whatever their length).
Without ``max_tokens`` a completion gets 16 tokens (OpenAI's default) and a chat reply 4096.
Token counts in ``usage`` are characters / 4, rounded up, like the oracles' own tokens.
``"stream": true`` sends the answer as server-sent events, one token (4 characters) each, then
``data: [DONE]``; the usage comes in a last event when ``stream_options.include_usage`` asks for
it. A client may close the stream at any point (the handler's broken pipe is expected and quiet).

Manual use: ``python -m tabmem.llm.oracle.server --port 8000`` prints the base URL and serves
every dataset whose file is present until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from tabmem.data import Dataset, dataset_specs, load_dataset
from tabmem.errors import DatasetError
from tabmem.llm.local_server import AppHTTPServer, LocalServer
from tabmem.llm.oracle.catalog import ORACLES, spread_oracle
from tabmem.llm.oracle.models import (
    CHARS_PER_TOKEN,
    Oracle,
    last_user_text,
    message_text,
)
from tabmem.llm.oracle.partial import PartialOracle, Recall

DEFAULT_MAX_TOKENS = {"chat": 4096, "completion": 16}
THINKING = {"+think": "inline", "+reason": "separate"}
THOUGHTS = "Okay, this is the start of a table.\nLet me recall how it goes on, line by line.\n"
BLOCK = f"<think>\n{THOUGHTS}</think>\n\n"


def load_available_datasets() -> list[Dataset]:
    """Every configured dataset whose file is present; the others are skipped."""
    datasets = []
    for spec in dataset_specs().values():
        try:
            datasets.append(load_dataset(spec))
        except DatasetError:
            continue
    return datasets


class ApiError(Exception):
    """A request the server refuses, with OpenAI's error fields."""

    def __init__(
        self,
        status: HTTPStatus,
        message: str,
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param

    def payload(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {
            "error": {"message": str(self), "type": kind, "param": self.param, "code": self.code}
        }


def _tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _int_param(body: dict[str, Any], name: str, default: int, minimum: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ApiError(
            HTTPStatus.BAD_REQUEST, f"'{name}' must be an integer >= {minimum}.", param=name
        )
    return value


def _stop_param(body: dict[str, Any]) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return stop
    raise ApiError(
        HTTPStatus.BAD_REQUEST, "'stop' must be a string or a list of strings.", param="stop"
    )


@dataclass(frozen=True)
class EventStream:
    """A reply to send as server-sent events."""

    events: list[dict[str, Any]]


def event_stream(kind: str, reply: dict[str, Any], include_usage: bool) -> EventStream:
    """A whole reply cut into OpenAI's stream chunks: one per token, a last one with the
    finish reason, and the usage alone when asked for."""
    choice = reply["choices"][0]
    text = choice["message"]["content"] if kind == "chat" else choice["text"]
    head = {
        "id": reply["id"],
        "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
        "created": reply["created"],
        "model": reply["model"],
    }

    def chunk(piece: str, finish: str | None) -> dict[str, Any]:
        content = {"delta": {"content": piece}} if kind == "chat" else {"text": piece}
        return {**head, "choices": [{"index": 0, **content, "finish_reason": finish}]}

    pieces = [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]
    events = [chunk(piece, None) for piece in pieces]
    events.append(chunk("", choice["finish_reason"]))
    if include_usage:
        events.append({**head, "choices": [], "usage": reply["usage"]})
    return EventStream(events)


class _Handler(BaseHTTPRequestHandler):
    """Turns HTTP requests into ``OracleServer.handle_*`` calls and their results into JSON."""

    protocol_version = "HTTP/1.1"
    server_version = "tabmem-oracle"
    timeout = 60
    server: AppHTTPServer

    def do_GET(self) -> None:
        self._send(*self.server.app.handle_get(self.path.split("?", 1)[0]))

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            error = ApiError(HTTPStatus.BAD_REQUEST, "Content-Length is not a valid length.")
            self._send(error.status, error.payload())
            return
        raw = self.rfile.read(length)
        self._send(*self.server.app.handle_post(self.path.split("?", 1)[0], raw))

    def _send(self, status: HTTPStatus, payload: dict[str, Any] | EventStream) -> None:
        if isinstance(payload, EventStream):
            self._send_events(payload)
            return
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_events(self, stream: EventStream) -> None:
        """Each event flushed on its own; a client that closes early ends the stream with a
        broken pipe, which ``AppHTTPServer.handle_error`` keeps quiet."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in stream.events:
            self.wfile.write(b"data: " + json.dumps(event).encode("utf-8") + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: runs and tests should not print an access log."""


class OracleServer(LocalServer):
    """The oracles behind an OpenAI-compatible API on 127.0.0.1, served from a background thread.

    ``request_count`` counts generation requests received (POSTs to a completions endpoint,
    whatever their outcome), so tests can check that every query reached the server once.
    """

    handler = _Handler
    thread_name = "oracle server"

    def __init__(self, datasets: Sequence[Dataset] | None = None, port: int = 0) -> None:
        datasets = load_available_datasets() if datasets is None else list(datasets)
        self.oracles: dict[str, Oracle] = {name: cls(datasets) for name, cls in ORACLES.items()}
        self._datasets = datasets
        super().__init__(port)
        self._count = 0
        self._lock = threading.Lock()
        self._prefixes: set[str] = set()

    def oracle(self, model: object) -> Oracle | None:
        """The oracle a request's ``model`` names: a fixed one, or one built on its first
        request, a partial memorizer (``oracle-partial-random-0.2-s0``, ``…-s0-chance``) or a
        panel family at a spread (``oracle-moments-t0.25``); None for an unknown name."""
        if not isinstance(model, str):
            return None
        with self._lock:
            if model not in self.oracles:
                recall = Recall.parse(model)
                oracle = (
                    spread_oracle(model, self._datasets)
                    if recall is None
                    else PartialOracle(self._datasets, recall)
                )
                if oracle is None:
                    return None
                self.oracles[model] = oracle
            return self.oracles[model]

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._count

    def handle_get(self, path: str) -> tuple[HTTPStatus, dict[str, Any]]:
        """The response (status, JSON body) to a GET request."""
        if path != "/v1/models":
            return _not_found(path)
        models = [
            {"id": name, "object": "model", "created": 0, "owned_by": "tabmem"}
            for name in self.oracles
        ]
        return HTTPStatus.OK, {"object": "list", "data": models}

    def handle_post(self, path: str, raw: bytes) -> tuple[HTTPStatus, dict[str, Any] | EventStream]:
        """The response (status, JSON body or event stream) to a POST request with body ``raw``."""
        kinds = {"/v1/chat/completions": "chat", "/v1/completions": "completion"}
        if path not in kinds:
            return _not_found(path)
        with self._lock:
            self._count += 1
        try:
            body = _parse_json(raw)
            reply = self._generate(kinds[path], body)
        except ApiError as error:
            return error.status, error.payload()
        if body.get("stream"):
            options = body.get("stream_options")
            usage = isinstance(options, dict) and bool(options.get("include_usage"))
            return HTTPStatus.OK, event_stream(kinds[path], reply, usage)
        return HTTPStatus.OK, reply

    def _cached_prefix(self, messages: Any) -> int:
        """Tokens of the messages before the last one if they were sent before, else 0."""
        if not isinstance(messages, list) or len(messages) < 2:
            return 0
        prefix = json.dumps(messages[:-1], sort_keys=True)
        with self._lock:
            seen = prefix in self._prefixes
            self._prefixes.add(prefix)
        return _tokens("".join(message_text(m) for m in messages[:-1])) if seen else 0

    def _generate(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        model = body.get("model")
        thinking = "none"
        for suffix, mode in THINKING.items():
            if isinstance(model, str) and model.endswith(suffix):
                thinking = "inline" if kind == "completion" else mode
                oracle = self.oracle(model.removesuffix(suffix))
                break
        else:
            oracle = self.oracle(model)
        if oracle is None:
            raise ApiError(
                HTTPStatus.NOT_FOUND,
                f"The model '{model}' does not exist; use one of {', '.join(self.oracles)}.",
                code="model_not_found",
                param="model",
            )
        if _int_param(body, "n", 1, 1) != 1:
            raise ApiError(HTTPStatus.BAD_REQUEST, "Only n=1 is supported.", param="n")
        if body.get("max_tokens") is None and "max_completion_tokens" in body:
            body = {**body, "max_tokens": body["max_completion_tokens"]}
        max_tokens = _int_param(body, "max_tokens", DEFAULT_MAX_TOKENS[kind], 0)
        stop = _stop_param(body)
        seed = _int_param(body, "seed", 0, -(2**63))
        temperature = body.get("temperature")
        temperature = float(temperature) if isinstance(temperature, int | float) else 1.0
        prompts, prompt_chars = _prompts(kind, body)
        choices = []
        reserved = {"none": 0, "inline": _tokens(BLOCK), "separate": _tokens(THOUGHTS)}
        thought_tokens = reserved[thinking]
        for index, prompt in enumerate(prompts):
            budget = max(0, max_tokens - thought_tokens)
            answer = oracle.answer(prompt, budget, stop, seed, temperature, chat=kind == "chat")
            text, finish = answer.text, answer.finish_reason
            if thinking == "inline":
                text, finish = _after_thoughts(text, finish, stop, max_tokens)
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if thinking == "separate":
                message["reasoning_content"] = THOUGHTS
            content = {"message": message} if kind == "chat" else {"text": text}
            choices.append({"index": index, **content, "finish_reason": finish, "logprobs": None})
        prompt_tokens = _tokens(prompt_chars)
        completion_tokens = sum(
            _tokens(c["message"]["content"] if kind == "chat" else c["text"]) for c in choices
        )
        details: dict[str, Any] = {}
        if kind == "chat":
            cached = self._cached_prefix(body.get("messages"))
            if cached:
                details["prompt_tokens_details"] = {"cached_tokens": cached}
        if thinking == "separate":
            completion_tokens += thought_tokens * len(choices)
            details["completion_tokens_details"] = {"reasoning_tokens": thought_tokens}
        return {
            "id": f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex}",
            "object": "chat.completion" if kind == "chat" else "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                **details,
            },
        }


def _after_thoughts(answer: str, finish: str, stop: list[str], max_tokens: int) -> tuple[str, str]:
    """A think block, then ``answer``: a stop sequence inside the block ends the text there,
    and ``max_tokens`` counts the block too, as a server without a reasoning parser does."""
    cuts = [BLOCK.find(s) for s in stop if s and s in BLOCK]
    if cuts:
        return BLOCK[: min(cuts)], "stop"
    if _tokens(BLOCK) >= max_tokens:
        return BLOCK[: max_tokens * CHARS_PER_TOKEN], "length"
    return BLOCK + answer, finish


def _parse_json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        message = f"The request body is not valid JSON ({exc})."
        raise ApiError(HTTPStatus.BAD_REQUEST, message) from exc
    if not isinstance(body, dict):
        raise ApiError(HTTPStatus.BAD_REQUEST, "The request body must be a JSON object.")
    return body


def _prompts(kind: str, body: dict[str, Any]) -> tuple[list[str], str]:
    """The prompt texts to answer, and all prompt characters (for ``usage``)."""
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ApiError(
                HTTPStatus.BAD_REQUEST, "'messages' must be a list of objects.", param="messages"
            )
        text = last_user_text(messages)
        if text is None:
            raise ApiError(HTTPStatus.BAD_REQUEST, "There is no user message.", param="messages")
        return [text], "".join(message_text(m) for m in messages)
    prompt = body.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise ApiError(
            HTTPStatus.BAD_REQUEST,
            "'prompt' must be a string or a list of strings.",
            param="prompt",
        )
    return prompts, "".join(prompts)


def _not_found(path: str) -> tuple[HTTPStatus, dict[str, Any]]:
    error = ApiError(HTTPStatus.NOT_FOUND, f"There is no endpoint {path}.", code="unknown_url")
    return error.status, error.payload()


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the oracles over every available dataset until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m tabmem.llm.oracle.server", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    args = parser.parse_args(argv)
    datasets = load_available_datasets()
    with OracleServer(datasets, port=args.port) as server:
        names = ", ".join(d.name for d in datasets) or "none"
        print(server.base_url, flush=True)
        print(f"Serving {', '.join(server.oracles)} over: {names}. Ctrl-C stops.", file=sys.stderr)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
