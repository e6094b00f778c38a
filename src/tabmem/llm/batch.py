"""OpenAI's Batch API: a test's uncached requests sent as one batch, at about half the price.

The protocol (``/v1/files`` and ``/v1/batches``): upload the requests as a JSONL file
(``purpose=batch``), create a batch over it for one endpoint, poll its status until it ends,
then read its output file (one answer per ``custom_id``) and its error file. A batch may take
up to its completion window (24 h) to end.

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
        root = api_base.rstrip("/")
        self._root = root.removesuffix("/v1")
        self._http = httpx.Client(
            timeout=timeout, headers={"Authorization": f"Bearer {api_key or 'unused'}"}
        )
        self.state_dir = state_dir
        self.poll_seconds = poll_seconds
        self._sleep = sleep

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
        if batch.get("status") != "completed":
            why = f"batch {batch_id} {batch.get('status')}"
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
                batch = self._request("GET", f"/v1/batches/{batch_id}")
            except TransientProviderError:
                self._sleep(self.poll_seconds)
                continue
            counts = batch.get("request_counts") or {}
            if progress is not None:
                done = int(counts.get("completed", 0)) + int(counts.get("failed", 0))
                progress(done, int(counts.get("total", 0)))
            if batch.get("status") in ENDED:
                return batch
            self._sleep(self.poll_seconds)

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
            response = self._http.request(method, self._root + path, **kwargs)
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
