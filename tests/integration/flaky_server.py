"""A flaky OpenAI-compatible server on 127.0.0.1: the oracle models behind faults and latency.

It answers like ``tabmem.llm.oracle.server.OracleServer`` (whose oracles it asks), except that a
schedule decides, for each attempt of each request, whether to fail it instead:

- ``rate_limit``: HTTP 429 with a ``Retry-After`` header (seconds, maybe fractional);
- ``server_error``: HTTP 500;
- ``hang``: no answer until ``hang_seconds`` pass (past the client's timeout), then a closed
  connection;
- ``drop``: the connection is closed without any response;
- ``empty_body`` / ``malformed_json``: HTTP 200 with an empty body, or with JSON cut short;
- ``empty_completion``: HTTP 200 with a well-formed reply whose text is empty;
- ``unauthorized``: HTTP 401 whose message repeats the key the client sent (a careless proxy),
  to check that no key reaches a log.

Schedules are deterministic: a seeded one draws each attempt's fault from the request body, the
attempt number and the seed alone, so the same grid meets the same faults whatever the order in
which its concurrent requests arrive. Every request is logged (``arrivals``), so tests can check
that the server saw exactly the queries and retries the client counted, and the token usage
it reported is tallied (``usage_totals``), so tests can check the client's counts. ``latency``
makes every answer take a fixed time (benchmarks), and ``hold_after(n)`` lets n more requests
through and keeps every later one waiting until ``release()`` (to kill a client while nothing is
in flight but held requests).

Only tests and benchmarks use it, so it lives with the tests. Manual use:
``PYTHONPATH=src python tests/integration/flaky_server.py --latency 0.2`` prints the base URL
and serves until it is stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from tabmem.data import Dataset
from tabmem.llm.local_server import AppHTTPServer, LocalServer
from tabmem.llm.oracle.models import rng_for

GENERATION_PATHS = ("/v1/chat/completions", "/v1/completions")
USAGE_KEYS = ("prompt_tokens", "completion_tokens")


class Fault(StrEnum):
    """What the server does instead of answering one attempt of a request."""

    RATE_LIMIT = "rate_limit"
    SERVER_ERROR = "server_error"
    HANG = "hang"
    DROP = "drop"
    EMPTY_BODY = "empty_body"
    MALFORMED_JSON = "malformed_json"
    EMPTY_COMPLETION = "empty_completion"
    UNAUTHORIZED = "unauthorized"


@dataclass(frozen=True)
class SeededFaults:
    """Each attempt of a request meets fault ``f`` with probability ``rates[f]``.

    The draw depends on the request body, the attempt number and the seed only; after
    ``max_faults`` faulty attempts a request is answered, so a client that retries at least
    that often gets every answer.
    """

    seed: int = 0
    rates: Mapping[Fault, float] = field(default_factory=dict)
    max_faults: int = 2

    def fault_for(self, key: str, attempt: int) -> Fault | None:
        """The fault for attempt ``attempt`` (0-based) of the request whose body hashes to
        ``key``."""
        if attempt >= self.max_faults:
            return None
        draw = rng_for(f"{key}:{attempt}", self.seed).random()
        cumulative = 0.0
        for fault, rate in self.rates.items():
            cumulative += rate
            if draw < cumulative:
                return Fault(fault)
        return None


@dataclass(frozen=True)
class ScriptedFaults:
    """Attempt ``n`` of every request meets ``faults[n]``; later attempts are answered."""

    faults: Sequence[Fault | None] = ()

    def fault_for(self, key: str, attempt: int) -> Fault | None:
        return self.faults[attempt] if attempt < len(self.faults) else None


FaultSchedule = SeededFaults | ScriptedFaults


@dataclass(frozen=True)
class Arrival:
    """One request as the server saw it: which body, which attempt of it, and what it met."""

    key: str
    model: str
    attempt: int
    fault: Fault | None
    at: float
    authorization: str


@dataclass(frozen=True)
class Reply:
    """What the handler sends: a status, headers and body, or nothing (``status`` None)."""

    status: int | None
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    wait: float = 0.0
    answers: str = ""  # the request key this reply answers, recorded once it is sent


def request_key(raw: bytes) -> str:
    """A request's identity across retries: the hash of its JSON body, keys sorted."""
    try:
        canonical = json.dumps(json.loads(raw), sort_keys=True).encode()
    except (UnicodeDecodeError, json.JSONDecodeError):
        canonical = raw
    return hashlib.sha256(canonical).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    """Turns HTTP requests into ``FlakyServer.handle_post`` calls and sends the reply."""

    protocol_version = "HTTP/1.1"
    server_version = "tabmem-flaky"
    disable_nagle_algorithm = True  # headers and body leave at once, not 40 ms apart
    server: AppHTTPServer

    def do_GET(self) -> None:
        status, payload = self.server.app.oracle.handle_get(self.path.split("?", 1)[0])
        self._send(Reply(status, json.dumps(payload).encode()))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        authorization = self.headers.get("Authorization") or ""
        self._send(self.server.app.handle_post(self.path.split("?", 1)[0], raw, authorization))

    def _send(self, reply: Reply) -> None:
        if reply.wait:
            time.sleep(reply.wait)
        if reply.status is None:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(reply.body)
        self.server.app.sent(reply)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and benchmarks should not print an access log."""


class FlakyServer(LocalServer):
    """The oracles on 127.0.0.1 behind a fault schedule, a fixed latency and a hold switch.

    ``aliases`` maps a model name the client sends (``gpt-4``) to an oracle's name;
    ``default_model`` answers any other unknown name. ``retry_after`` is what a 429 asks for.
    """

    handler = _Handler
    thread_name = "flaky server"
    queue_size = 512  # 64 concurrent clients must not overflow the listen backlog

    def __init__(
        self,
        datasets: Sequence[Dataset] | None = None,
        schedule: FaultSchedule | None = None,
        latency: float = 0.0,
        retry_after: float = 0.2,
        hang_seconds: float = 5.0,
        aliases: Mapping[str, str] | None = None,
        default_model: str | None = None,
        port: int = 0,
    ) -> None:
        from tabmem.llm.oracle.server import OracleServer

        super().__init__(port)

        self.oracle = OracleServer(datasets)
        self.schedule = schedule or ScriptedFaults()
        self.latency = latency
        self.retry_after = retry_after
        self.hang_seconds = hang_seconds
        self.aliases = dict(aliases or {})
        self.default_model = default_model
        self._lock = threading.Lock()
        self._arrivals: list[Arrival] = []
        self._attempts: Counter[str] = Counter()
        self._answered: list[str] = []
        self._usage: Counter[str] = Counter()
        self._passes_left: int | None = None
        self._n_held = 0
        self._released = threading.Event()
        self._stopping = threading.Event()

    @property
    def arrivals(self) -> list[Arrival]:
        """Every generation request received so far, in arrival order."""
        with self._lock:
            return list(self._arrivals)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._arrivals)

    @property
    def answered(self) -> list[str]:
        """The keys of requests answered with a completion (an empty one included)."""
        with self._lock:
            return list(self._answered)

    @property
    def usage_totals(self) -> dict[str, int]:
        """``prompt_tokens`` and ``completion_tokens`` summed over every answer's ``usage``."""
        with self._lock:
            return {k: self._usage[k] for k in USAGE_KEYS}

    def fault_counts(self) -> Counter[str]:
        """How many attempts met each fault (``"answered"`` for the others)."""
        return Counter(a.fault.value if a.fault else "answered" for a in self.arrivals)

    def hold_after(self, passes: int) -> None:
        """Let ``passes`` more requests through, then keep every later one waiting until
        ``release``."""
        self._released.clear()
        with self._lock:
            self._passes_left = passes

    def release(self) -> None:
        """Let held requests (and later ones) through."""
        with self._lock:
            self._passes_left = None
        self._released.set()

    def held(self) -> int:
        """How many requests are waiting now because of ``hold_after``."""
        with self._lock:
            return self._n_held

    def _before_start(self) -> None:
        self._stopping.clear()

    def _before_shutdown(self) -> None:
        """Hanging and held requests end at once."""
        self._stopping.set()
        self._released.set()

    def handle_post(self, path: str, raw: bytes, authorization: str) -> Reply:
        """Log the request, wait if held, then fail it as scheduled or answer it."""
        arrived = time.monotonic()
        if path not in GENERATION_PATHS:
            return self._json_reply(*self.oracle.handle_post(path, raw))
        key = request_key(raw)
        body = self._rename_model(raw)
        with self._lock:
            attempt = self._attempts[key]
            self._attempts[key] += 1
            fault = self.schedule.fault_for(key, attempt)
            model = str(body.get("model", "")) if isinstance(body, dict) else ""
            self._arrivals.append(Arrival(key, model, attempt, fault, arrived, authorization))
        self._wait_if_held()
        if fault is Fault.UNAUTHORIZED:
            reply = _unauthorized(authorization)
        elif fault:
            reply = self._faulty_reply(fault, path)
        else:
            reply = self._answer(path, raw, body)
        if reply.status is None:
            return reply
        remaining = max(0.0, self.latency - (time.monotonic() - arrived))
        answers = key if reply.status == HTTPStatus.OK else ""
        return Reply(reply.status, reply.body, reply.headers, remaining, answers)

    def sent(self, reply: Reply) -> None:
        """Called by the handler once ``reply`` is written: an answer now counts as answered."""
        if reply.answers:
            with self._lock:
                self._answered.append(reply.answers)

    def _wait_if_held(self) -> None:
        with self._lock:
            if self._passes_left is None:
                return
            if self._passes_left > 0:
                self._passes_left -= 1
                return
            self._n_held += 1
        self._released.wait()
        with self._lock:
            self._n_held -= 1

    def _rename_model(self, raw: bytes) -> Any:
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            name = body["model"]
            if name in self.aliases:
                body["model"] = self.aliases[name]
            elif name not in self.oracle.oracles and self.default_model:
                body["model"] = self.default_model
        return body

    def _answer(self, path: str, raw: bytes, body: Any) -> Reply:
        payload = json.dumps(body).encode() if body is not None else raw
        status, reply = self.oracle.handle_post(path, payload)
        usage = reply.get("usage") if status == HTTPStatus.OK else None
        if isinstance(usage, dict):
            with self._lock:
                self._usage.update({k: int(usage.get(k, 0)) for k in USAGE_KEYS})
        return self._json_reply(status, reply)

    def _faulty_reply(self, fault: Fault, path: str) -> Reply:
        """The reply (or silence) that stands for ``fault``."""
        if fault is Fault.RATE_LIMIT:
            error = {"error": {"message": "Rate limit reached.", "type": "rate_limit_error"}}
            return Reply(
                HTTPStatus.TOO_MANY_REQUESTS,
                json.dumps(error).encode(),
                {"Retry-After": f"{self.retry_after:g}"},
            )
        if fault is Fault.SERVER_ERROR:
            error = {"error": {"message": "Injected server error.", "type": "server_error"}}
            return Reply(HTTPStatus.INTERNAL_SERVER_ERROR, json.dumps(error).encode())
        if fault is Fault.HANG:
            self._stopping.wait(self.hang_seconds)
            return Reply(None)
        if fault is Fault.DROP:
            return Reply(None)
        if fault is Fault.EMPTY_BODY:
            return Reply(HTTPStatus.OK, b"")
        if fault is Fault.MALFORMED_JSON:
            return Reply(HTTPStatus.OK, b'{"id": "cmpl-1", "choices": [{"text": "1,2')
        return Reply(HTTPStatus.OK, json.dumps(_empty_completion(path)).encode())

    @staticmethod
    def _json_reply(status: HTTPStatus, payload: dict[str, Any]) -> Reply:
        return Reply(status, json.dumps(payload).encode())


def _unauthorized(authorization: str) -> Reply:
    key = authorization.removeprefix("Bearer ")
    message = f"Incorrect API key provided: {key}."
    error = {
        "error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}
    }
    return Reply(HTTPStatus.UNAUTHORIZED, json.dumps(error).encode())


def _empty_completion(path: str) -> dict[str, Any]:
    """A well-formed reply with empty text, chat or plain completion as ``path`` asks."""
    chat = path == "/v1/chat/completions"
    choice: dict[str, Any] = (
        {"message": {"role": "assistant", "content": ""}} if chat else {"text": ""}
    )
    return {
        "id": "cmpl-empty",
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": "empty",
        "choices": [{"index": 0, **choice, "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
    }


def _datasets(names: str) -> list[Dataset] | None:
    """The named datasets, or None (all available ones) when no name is given."""
    if not names:
        return None
    from tabmem.data import dataset_specs, load_dataset

    specs = dataset_specs()
    return [load_dataset(specs[name]) for name in names.split(",")]


def _parse_rate(text: str) -> tuple[Fault, float]:
    name, _, rate = text.partition("=")
    return Fault(name), float(rate)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the oracles with the given latency and faults until stopped."""
    parser = argparse.ArgumentParser(
        prog="tests/integration/flaky_server.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault schedule")
    parser.add_argument(
        "--fault", action="append", default=[], metavar="NAME=RATE", help="e.g. rate_limit=0.1"
    )
    parser.add_argument(
        "--default-model", default="oracle-memorizer", help="oracle answering unknown model names"
    )
    parser.add_argument(
        "--datasets", default="", help="comma-separated datasets the oracles know (default: all)"
    )
    args = parser.parse_args(argv)
    schedule = SeededFaults(seed=args.seed, rates=dict(_parse_rate(f) for f in args.fault))
    server = FlakyServer(
        datasets=_datasets(args.datasets),
        schedule=schedule,
        latency=args.latency,
        default_model=args.default_model,
        port=args.port,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        print(server.base_url, flush=True)
        print(f"Serving with latency {args.latency:g} s. Ctrl-C stops.", file=sys.stderr)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()


if __name__ == "__main__":
    main()
