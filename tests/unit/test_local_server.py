"""The shared lifecycle of the local HTTP servers: start, serve, stop, hooks, port release."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from tabmem.llm.local_server import HOST, LocalServer


class _Echo(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.app.greeting.encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


class _Greeter(LocalServer):
    handler = _Echo
    thread_name = "greeter"

    def __init__(self) -> None:
        super().__init__()
        self.greeting = "hello"
        self.events: list[str] = []

    def _before_start(self) -> None:
        self.events.append("start")

    def _before_shutdown(self) -> None:
        self.events.append("shutdown")


def test_base_url_before_start_names_the_server() -> None:
    with pytest.raises(RuntimeError, match="greeter is not running"):
        _ = _Greeter().base_url


def test_serves_its_app_and_releases_the_port() -> None:
    server = _Greeter()
    with server:
        url = server.base_url
        assert url.startswith(f"http://{HOST}:") and url.endswith("/v1")
        assert httpx.get(url.removesuffix("/v1") + "/any").text == "hello"
        port = int(url.split(":")[2].split("/")[0])
    assert server.events == ["start", "shutdown"]
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect((HOST, port))


def test_start_twice_keeps_one_server_and_stop_twice_is_harmless() -> None:
    server = _Greeter()
    first = server.start().base_url
    assert server.start().base_url == first
    server.stop()
    server.stop()
    assert server.events == ["start", "shutdown"]
