"""MLflow's client in a helper process, so that a cell's process never waits for it to import.

Importing MLflow and opening its SQLAlchemy store costs about 1.6 s of CPU, longer than a
reference model's whole cell. A process that has not imported MLflow starts one helper
(``python -m tabmem.tracking.writer_process``) as soon as it knows a cell will run; the helper
imports MLflow and opens the store on the second core while the cell loads its data and model,
then writes each run the cell sends it with the same ``TrackingStore.log_cell``. Runs are
written to the same store, under the same lock, by MLflow's own client: the helper only moves
where that client lives.

The parent sends requests as pickles on the helper's stdin and reads replies from its stdout
(the helper's own prints go to stderr). A request that cannot be pickled, or a helper that is
gone, is written in the parent instead; an error raised while writing is raised in the parent.
The helper ends when its stdin closes: at the parent's exit, or when the parent dies.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

StoreKey = tuple[str, str | None, str, str]
"""A store as the helper opens it: its URI, artifact root, experiment and lock file."""


class WriterGone(Exception):
    """The helper cannot take the request (it exited, or the request cannot be pickled)."""


class StoreWriter:
    """One helper process, shared by every store the parent writes to."""

    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])  # the tabmem this process runs
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, path]))}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tabmem.tracking.writer_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self._lock = threading.Lock()
        self._alive = True
        self._opened: set[StoreKey] = set()

    @property
    def alive(self) -> bool:
        return self._alive and self._process.poll() is None

    def open(self, key: StoreKey) -> None:
        """Have the helper open this store now, while the parent works (no reply)."""
        if key in self._opened:
            return
        self._opened.add(key)
        with contextlib.suppress(WriterGone):  # the write itself then falls back to the parent
            self._send(("open", key, None))

    def log_cell(self, key: StoreKey, arguments: dict[str, Any]) -> str:
        """Write one run through the helper and return its id (``TrackingStore.log_cell``)."""
        with self._lock:
            self._send(("log", key, arguments))
            assert self._process.stdout is not None
            try:
                status, value = pickle.load(self._process.stdout)
            except (EOFError, OSError, pickle.UnpicklingError) as exc:
                self._alive = False
                raise WriterGone(f"the MLflow helper exited: {exc}") from exc
        if status == "error":
            raise value
        return str(value)

    def _send(self, message: tuple[str, StoreKey, Any]) -> None:
        if not self.alive:
            raise WriterGone("the MLflow helper is not running")
        try:
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an object of the run that cannot be pickled
            raise WriterGone(f"the run cannot be sent to the MLflow helper: {exc}") from exc
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(data)
            self._process.stdin.flush()
        except OSError as exc:
            self._alive = False
            raise WriterGone(f"the MLflow helper exited: {exc}") from exc

    def close(self, timeout: float = 30.0) -> None:
        """Close the helper's stdin and wait for it to finish what it was sent."""
        self._alive = False
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


_writer: StoreWriter | None = None
_writer_lock = threading.Lock()


def writer_for(key: StoreKey) -> StoreWriter | None:
    """This process's helper, started on first call and asked to open the store ``key`` names;
    None where MLflow is already imported here, so a helper would save nothing."""
    global _writer
    if "mlflow" in sys.modules:
        return None
    with _writer_lock:
        if _writer is None or not _writer.alive:
            _writer = StoreWriter()
            atexit.register(_writer.close)
        writer = _writer
    writer.open(key)
    return writer
