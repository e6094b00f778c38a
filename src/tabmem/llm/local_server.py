"""An HTTP server on 127.0.0.1 run from a daemon thread: the lifecycle shared by the oracle
server and the flaky server that tests start and stop around a grid."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

HOST = "127.0.0.1"


class AppHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server whose handlers reach their application as ``server.app``."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        app: Any,
        queue_size: int,
    ) -> None:
        self.request_queue_size = queue_size
        super().__init__(address, handler)
        self.app = app

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (a timeout) closes its socket; that is expected and stays
        quiet. Any other error in a handler is printed as usual."""
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class LocalServer:
    """Serves ``handler`` on 127.0.0.1 (port 0: any free one) from a daemon thread.

    Subclasses set ``handler`` and ``thread_name``; ``_before_shutdown`` lets them wake
    requests they are holding, so that stopping never waits on them.
    """

    handler: type[BaseHTTPRequestHandler]
    thread_name = "local-server"
    queue_size = 5

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._httpd: AppHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI ``api_base``, ``http://127.0.0.1:PORT/v1``, once started."""
        if self._httpd is None:
            raise RuntimeError(f"The {self.thread_name} is not running; call start() first.")
        return f"http://{HOST}:{self._httpd.server_address[1]}/v1"

    def start(self) -> Self:
        """Bind the port and serve from a daemon thread (no-op when already serving)."""
        if self._httpd is None:
            self._before_start()
            self._httpd = AppHTTPServer((HOST, self._port), self.handler, self, self.queue_size)
            self._thread = threading.Thread(  # polled every 50 ms: stop() waits that, not 0.5 s
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=self.thread_name,
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._httpd is None:
            return
        self._before_shutdown()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = None
        self._thread = None

    def _before_start(self) -> None:
        """Hook: reset state a previous ``stop`` left behind."""

    def _before_shutdown(self) -> None:
        """Hook: release requests the server is keeping waiting."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
