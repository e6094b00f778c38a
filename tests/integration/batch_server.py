"""A local server that speaks OpenAI's Batch API over the oracles, for the batch-mode tests.

``POST /v1/files`` (multipart, ``purpose=batch``) stores a JSONL file; ``POST /v1/batches``
creates a batch over it, answered in a background thread once ``release`` is set (so a test
can kill a grid while its batch is pending); ``GET /v1/batches/{id}`` reports its status and
counts; ``GET /v1/files/{id}/content`` returns the output file. Each line is answered by the
oracle server's own request handling; ``lines_answered`` counts them.

Anthropic's Message Batches too: ``POST /v1/messages/batches`` with the requests,
``GET /v1/messages/batches/{id}`` (``processing_status``), and the JSONL results at its
``results_url``; each request's Messages parameters are answered as the same chat request.
"""

from __future__ import annotations

import email.parser
import itertools
import json
import threading
from http import HTTPStatus
from typing import Any

from tabmem.llm.oracle import OracleServer
from tabmem.llm.oracle.server import ApiError, _Handler

KINDS = {"/v1/chat/completions": "chat", "/v1/completions": "completion"}


class _BatchHandler(_Handler):
    def do_POST(self) -> None:
        if self.path.startswith("/v1/files"):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(*self.server.app.upload(self.headers.get("Content-Type", ""), raw))
            return
        super().do_POST()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        raw_file = path.startswith("/v1/files/") and path.endswith("/content")
        results = path.startswith("/v1/messages/batches/") and path.endswith("/results")
        if raw_file or results:
            key = path.split("/")[3] if raw_file else f"results-{path.split('/')[4]}"
            data = self.server.app.content(key)
            self.send_response(HTTPStatus.OK if data is not None else HTTPStatus.NOT_FOUND)
            self.send_header("Content-Type", "application/jsonl")
            self.send_header("Content-Length", str(len(data or b"")))
            self.end_headers()
            self.wfile.write(data or b"")
            return
        super().do_GET()


class BatchServer(OracleServer):
    """The oracle server plus files and batches; ``hold=True`` keeps batches pending until
    ``release`` is set."""

    handler = _BatchHandler

    def __init__(self, datasets: list, hold: bool = False) -> None:
        super().__init__(datasets)
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.lines_answered = 0
        self._ids = itertools.count(1)
        self._batch_lock = threading.Lock()

    def upload(self, content_type: str, raw: bytes) -> tuple[HTTPStatus, dict[str, Any]]:
        message = email.parser.BytesParser().parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        fields = {
            part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in message.get_payload()
        }
        if fields.get("purpose") != b"batch" or not fields.get("file"):
            return HTTPStatus.BAD_REQUEST, {"error": {"message": "purpose=batch and a file"}}
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = fields["file"]
        return HTTPStatus.OK, {"id": file_id, "object": "file", "purpose": "batch"}

    def content(self, file_id: str) -> bytes | None:
        return self.files.get(file_id)

    def handle_get(self, path: str) -> tuple[HTTPStatus, dict[str, Any]]:
        if path.startswith(("/v1/batches/", "/v1/messages/batches/")):
            with self._batch_lock:
                batch = self.batches.get(path.rsplit("/", 1)[1])
                return (HTTPStatus.OK, dict(batch)) if batch else (HTTPStatus.NOT_FOUND, {})
        return super().handle_get(path)

    def handle_post(self, path: str, raw: bytes) -> tuple[HTTPStatus, Any]:
        if path == "/v1/messages/batches":
            return self._create_messages_batch(json.loads(raw)["requests"])
        if path != "/v1/batches":
            return super().handle_post(path, raw)
        body = json.loads(raw)
        lines = self.files[body["input_file_id"]].decode().splitlines()
        batch_id = f"batch-{next(self._ids)}"
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "status": "in_progress",
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "output_file_id": None,
            "error_file_id": None,
        }
        with self._batch_lock:
            self.batches[batch_id] = batch
        threading.Thread(target=self._answer, args=(batch_id, lines), daemon=True).start()
        return HTTPStatus.OK, dict(batch)

    def _answer(self, batch_id: str, lines: list[str]) -> None:
        self.release.wait()
        out = []
        for line in lines:
            job = json.loads(line)
            try:
                reply = self._generate(KINDS[job["url"]], job["body"])
                response = {"status_code": 200, "body": reply}
            except ApiError as error:
                response = {"status_code": int(error.status), "body": error.payload()}
            out.append(json.dumps({"custom_id": job["custom_id"], "response": response}))
            with self._batch_lock:
                self.lines_answered += 1
                self.batches[batch_id]["request_counts"]["completed"] += 1
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = "\n".join(out).encode()
        with self._batch_lock:
            self.batches[batch_id].update(status="completed", output_file_id=file_id)

    def _create_messages_batch(self, requests: list[dict]) -> tuple[HTTPStatus, dict[str, Any]]:
        batch_id = f"msgbatch_{next(self._ids)}"
        batch = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0},
            "results_url": None,
        }
        with self._batch_lock:
            self.batches[batch_id] = batch
        worker = threading.Thread(target=self._answer_messages, args=(batch_id, requests))
        worker.daemon = True
        worker.start()
        return HTTPStatus.OK, dict(batch)

    def _answer_messages(self, batch_id: str, requests: list[dict]) -> None:
        self.release.wait()
        out = []
        for item in requests:
            params = item["params"]
            system = [{"role": "system", "content": params["system"]}] if "system" in params else []
            body = {
                "model": params["model"],
                "messages": system + params["messages"],
                "max_tokens": params["max_tokens"],
                "temperature": params.get("temperature", 1.0),
                "stop": params.get("stop_sequences", []),
            }
            reply = self._generate("chat", body)
            usage = reply["usage"]
            message = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": reply["choices"][0]["message"]["content"]}],
                "usage": {
                    "input_tokens": usage["prompt_tokens"],
                    "output_tokens": usage["completion_tokens"],
                },
            }
            result = {"type": "succeeded", "message": message}
            out.append(json.dumps({"custom_id": item["custom_id"], "result": result}))
            with self._batch_lock:
                self.lines_answered += 1
                counts = self.batches[batch_id]["request_counts"]
                counts["processing"] -= 1
                counts["succeeded"] += 1
        self.files[f"results-{batch_id}"] = "\n".join(out).encode()
        with self._batch_lock:
            self.batches[batch_id].update(
                processing_status="ended",
                results_url=f"{self.base_url}/messages/batches/{batch_id}/results",
            )
