"""Batch APIs: a test's uncached requests sent as one batch, at about half the price.

OpenAI's protocol (``/v1/files`` and ``/v1/batches``, ``BatchClient``): upload the requests as
a JSONL file (``purpose=batch``), create a batch over it for one endpoint, poll its status
until it ends, then read its output file (one answer per ``custom_id``) and its error file.
Anthropic's Message Batches (``/v1/messages/batches``, ``AnthropicBatchClient``): the
requests go in the create call, the results come as JSONL from the batch's ``results_url``;
each result is turned into OpenAI's chat reply shape, so both are read the same way. A batch
may take up to 24 h to end.

Resuming: the batch's id is written to ``<state_dir>/<digest>.json`` as soon as it exists,
where the digest names the exact set of requests. A grid killed while its batch is pending
and run again polls the same batch instead of sending the requests twice; the file goes away
once the answers are read (each answer is then in the response cache).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tabmem.errors import ProviderError, TransientProviderError

ANTHROPIC_VERSION = "2023-06-01"
ENDPOINTS = {"chat": "/v1/chat/completions", "complete": "/v1/completions"}
ENDED = ("completed", "failed", "expired", "cancelled")
WINDOW = "24h"


@dataclass(frozen=True)
class BatchJob:
    """One request of a batch: its ``custom_id`` (the response cache's key) and its body."""

    custom_id: str
    kind: str  # "chat" or "complete"
    body: dict[str, Any]


@dataclass(frozen=True)
class BatchAnswer:
    """The provider's reply body to one job, or why there is none."""

    body: dict[str, Any] | None
    error: str | None = None


class BatchClient:
    """Sends jobs as batches to ``api_base`` (``…/v1``) and reads the answers back."""

    def __init__(
        self,
        api_base: str,
        api_key: str | None,
        state_dir: Path,
        poll_seconds: float = 10.0,
        timeout: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        root = api_base.rstrip("/").removesuffix("/messages")
        self._root = root.removesuffix("/v1")
        self._http = httpx.Client(timeout=timeout, headers=self._headers(api_key or "unused"))
        self.state_dir = state_dir
        self.poll_seconds = poll_seconds
        self._sleep = sleep

    def _headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def run(
        self, jobs: Sequence[BatchJob], progress: Callable[[int, int], None] | None = None
    ) -> dict[str, BatchAnswer]:
        """Every job's answer, one batch per endpoint; ``progress(done, total)`` while polling."""
        answers: dict[str, BatchAnswer] = {}
        for kind in ENDPOINTS:
            same = [job for job in jobs if job.kind == kind]
            if same:
                answers.update(self._one_batch(kind, same, progress))
        return answers

    def _one_batch(
        self, kind: str, jobs: Sequence[BatchJob], progress: Callable[[int, int], None] | None
    ) -> dict[str, BatchAnswer]:
        state = self.state_dir / f"{_digest(kind, jobs)}.json"
        batch_id = json.loads(state.read_text())["batch_id"] if state.is_file() else None
        if batch_id is None:
            batch_id = self._create(kind, jobs)
            state.parent.mkdir(parents=True, exist_ok=True)
            state.write_text(json.dumps({"batch_id": batch_id, "requests": len(jobs)}))
        batch = self._wait(batch_id, progress)
        answers = self._read(batch)
        if not self._succeeded(batch):
            status = batch.get("status") or batch.get("processing_status")
            why = f"batch {batch_id} ended as {status}"
            for job in jobs:
                answers.setdefault(job.custom_id, BatchAnswer(None, why))
        state.unlink(missing_ok=True)
        return {job.custom_id: answers.get(job.custom_id, _missing(batch_id)) for job in jobs}

    def _create(self, kind: str, jobs: Sequence[BatchJob]) -> str:
        lines = [
            json.dumps(
                {"custom_id": j.custom_id, "method": "POST", "url": ENDPOINTS[kind], "body": j.body}
            )
            for j in jobs
        ]
        upload = self._request(
            "POST",
            "/v1/files",
            data={"purpose": "batch"},
            files={"file": ("requests.jsonl", "\n".join(lines).encode(), "application/jsonl")},
        )
        created = self._request(
            "POST",
            "/v1/batches",
            json={
                "input_file_id": upload["id"],
                "endpoint": ENDPOINTS[kind],
                "completion_window": WINDOW,
            },
        )
        return str(created["id"])

    def _wait(self, batch_id: str, progress: Callable[[int, int], None] | None) -> dict:
        """Poll until the batch ends; transient failures of a poll are waited out."""
        while True:
            try:
                batch = self._request("GET", self._status_path(batch_id))
            except TransientProviderError:
                self._sleep(self.poll_seconds)
                continue
            done, total, ended = self._progress_of(batch)
            if progress is not None:
                progress(done, total)
            if ended:
                return batch
            self._sleep(self.poll_seconds)

    def _status_path(self, batch_id: str) -> str:
        return f"/v1/batches/{batch_id}"

    def _progress_of(self, batch: dict) -> tuple[int, int, bool]:
        """Requests answered, requests in all, and whether the batch has ended."""
        counts = batch.get("request_counts") or {}
        done = int(counts.get("completed", 0)) + int(counts.get("failed", 0))
        return done, int(counts.get("total", 0)), batch.get("status") in ENDED

    def _succeeded(self, batch: dict) -> bool:
        return batch.get("status") == "completed"

    def _read(self, batch: dict) -> dict[str, BatchAnswer]:
        """The answers of the output file and the reasons of the error file."""
        answers: dict[str, BatchAnswer] = {}
        for field in ("output_file_id", "error_file_id"):
            if not batch.get(field):
                continue
            text = self._content(str(batch[field]))
            for line in text.splitlines():
                if line.strip():
                    custom_id, answer = _parse_line(line)
                    answers[custom_id] = answer
        return answers

    def _content(self, file_id: str) -> str:
        response = self._send("GET", f"/v1/files/{file_id}/content")
        return response.text

    def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._send(method, path, **kwargs)
        try:
            reply = response.json()
        except ValueError as exc:
            raise TransientProviderError(f"unreadable batch reply from {path}") from exc
        if not isinstance(reply, dict):
            raise TransientProviderError(f"unreadable batch reply from {path}")
        return reply

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            url = path if path.startswith(("http://", "https://")) else self._root + path
            response = self._http.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            raise TransientProviderError(f"batch {path}: {type(exc).__name__}") from exc
        if response.status_code in (401, 403, 404):
            raise ProviderError(
                f"The batch endpoint {path} refused the request (HTTP {response.status_code}); "
                "check the API key and that the provider offers the Batch API."
            )
        if response.status_code >= 400:
            raise TransientProviderError(f"batch {path}: HTTP {response.status_code}")
        return response

    def close(self) -> None:
        self._http.close()


def _digest(kind: str, jobs: Sequence[BatchJob]) -> str:
    ids = sorted(job.custom_id for job in jobs)
    return hashlib.sha256(json.dumps([kind, ids]).encode()).hexdigest()[:24]


def _missing(batch_id: str) -> BatchAnswer:
    return BatchAnswer(None, f"batch {batch_id} returned no answer for this request")


def _parse_line(line: str) -> tuple[str, BatchAnswer]:
    """``custom_id`` and answer of one line of an output or error file."""
    record = json.loads(line)
    custom_id = str(record.get("custom_id"))
    response = record.get("response") or {}
    status = response.get("status_code")
    if status == 200 and isinstance(response.get("body"), dict):
        return custom_id, BatchAnswer(response["body"])
    error = record.get("error") or (response.get("body") or {}).get("error") or {}
    message = error.get("message") if isinstance(error, dict) else str(error)
    return custom_id, BatchAnswer(None, f"HTTP {status}: {message or 'no answer'}")


class AnthropicBatchClient(BatchClient):
    """Anthropic's Message Batches, read back as OpenAI chat replies."""

    def _headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}

    def run(
        self, jobs: Sequence[BatchJob], progress: Callable[[int, int], None] | None = None
    ) -> dict[str, BatchAnswer]:
        plain = [job for job in jobs if job.kind != "chat"]
        answers = {
            job.custom_id: BatchAnswer(None, "Anthropic's API has no plain completions")
            for job in plain
        }
        chats = [job for job in jobs if job.kind == "chat"]
        return {**answers, **(self._one_batch("chat", chats, progress) if chats else {})}

    def _create(self, kind: str, jobs: Sequence[BatchJob]) -> str:
        requests = [{"custom_id": j.custom_id, "params": j.body} for j in jobs]
        created = self._request("POST", "/v1/messages/batches", json={"requests": requests})
        return str(created["id"])

    def _status_path(self, batch_id: str) -> str:
        return f"/v1/messages/batches/{batch_id}"

    def _progress_of(self, batch: dict) -> tuple[int, int, bool]:
        counts = {k: int(v) for k, v in (batch.get("request_counts") or {}).items()}
        total = sum(counts.values())
        return total - counts.get("processing", 0), total, batch.get("processing_status") == "ended"

    def _succeeded(self, batch: dict) -> bool:
        return batch.get("processing_status") == "ended"

    def _read(self, batch: dict) -> dict[str, BatchAnswer]:
        url = batch.get("results_url")
        if not url:
            return {}
        response = self._send("GET", str(url))
        answers = {}
        for line in response.text.splitlines():
            if line.strip():
                record = json.loads(line)
                answers[str(record.get("custom_id"))] = _anthropic_result(record.get("result"))
        return answers


def _anthropic_result(result: Any) -> BatchAnswer:
    """One Message Batches result as an OpenAI chat reply (text, thoughts, usage)."""
    if not isinstance(result, dict) or result.get("type") != "succeeded":
        kind = result.get("type") if isinstance(result, dict) else "missing"
        error = (result or {}).get("error") if isinstance(result, dict) else None
        detail = (error.get("error") or error) if isinstance(error, dict) else {}
        return BatchAnswer(None, f"{kind}: {detail.get('message', 'no answer')}")
    message = result.get("message") or {}
    blocks = message.get("content") or []
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    thoughts = "".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking")
    usage = message.get("usage") or {}
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    reply_usage = {
        "prompt_tokens": int(usage.get("input_tokens", 0)) + read + write,
        "completion_tokens": int(usage.get("output_tokens", 0)),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }
    reply_message = {"role": "assistant", "content": text}
    if thoughts:
        reply_message["reasoning_content"] = thoughts
    return BatchAnswer({"choices": [{"message": reply_message}], "usage": reply_usage})


def anthropic_params(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat body as Anthropic's Messages parameters: system messages apart, stop
    sequences that Anthropic accepts (not whitespace alone: the answer is cut at those by the
    caller), ``top_p`` only when it is not 1 (newer models refuse it beside a temperature)."""
    messages = body.get("messages") or []
    system = "\n\n".join(str(m["content"]) for m in messages if m.get("role") == "system")
    params: dict[str, Any] = {
        "model": body["model"],
        "max_tokens": body["max_tokens"],
        "messages": [m for m in messages if m.get("role") != "system"],
        "temperature": body.get("temperature", 1.0),
    }
    if system:
        params["system"] = system
    if body.get("top_p", 1.0) != 1.0:
        params["top_p"] = body["top_p"]
    stops = [s for s in body.get("stop") or [] if s.strip()]
    if stops:
        params["stop_sequences"] = stops
    return params
