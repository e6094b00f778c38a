"""The MLflow helper process (``python -m tabmem.tracking.writer_process``): it opens the
stores its parent names and writes the runs the parent sends, with ``TrackingStore.log_cell``
(``tabmem.tracking.writer`` is the parent's side)."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import traceback
from pathlib import Path
from typing import IO, Any

from tabmem.tracking.store import TrackingStore
from tabmem.tracking.writer import StoreKey


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The helper's loop: open stores and write runs as the parent asks, until stdin closes."""
    stores: dict[StoreKey, TrackingStore] = {}

    def store_of(key: StoreKey) -> TrackingStore:
        if key not in stores:
            uri, root, experiment, lock = key
            stores[key] = TrackingStore(uri, Path(root) if root else None, experiment, Path(lock))
        return stores[key]

    while True:
        try:
            kind, key, arguments = pickle.load(requests)
        except EOFError:
            return
        if kind == "open":
            try:
                store_of(key).open_client()
            except Exception:  # said again, with its cause, when the run is written
                traceback.print_exc()
            continue
        try:
            reply: tuple[str, Any] = ("ok", store_of(key).log_cell(**arguments))
        except Exception as exc:
            reply = ("error", _picklable(exc))
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


def _picklable(exc: Exception) -> Exception:
    """``exc`` itself if it survives pickling, else a RuntimeError with its traceback."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        text = "".join(traceback.format_exception(exc))
        return RuntimeError(f"writing the MLflow run failed:\n{text}")


def main() -> None:
    """Serve the parent: requests on stdin, replies on the real stdout; prints go to stderr.
    Every run is committed when its reply is sent, so the helper then exits at once, without
    the second or so that tearing down MLflow's modules would take. Ctrl-C, which reaches the
    whole process group, is left to the parent: the helper finishes the run it is writing and
    exits when the parent closes its stdin (or dies)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _serve(sys.stdin.buffer, replies)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
