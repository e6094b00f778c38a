"""The response cache: sqlite, keyed by backend identity + request, written as answers arrive.

The key holds the backend's full identity (provider, model, the endpoint it resolved, weights
hash), the messages or prompt, every generation parameter and the sample index, so one model is
never served another model's answers and a re-run resumes where a crash stopped. Each answer is
stored with the token usage its provider reported, so a cache hit can say what it saved.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from tabmem.llm.base import FitRequest, Request


def cache_key(identity: dict[str, str], request: Request) -> str:
    """A sha256 over everything that can change a model's answer."""
    payload = {
        "identity": identity,
        "kind": request.kind,
        "messages": list(request.messages) if request.messages is not None else None,
        "prompt": request.prompt,
        "params": request.params.as_dict(),
        "sample_index": request.sample_index,
    }
    return _digest(payload)


def fit_key(identity: dict[str, str], request: FitRequest) -> str:
    """A sha256 over everything that can change a statistical baseline's fit: its identity,
    the training rows and labels, the rows it labels, the columns' kinds and the seed."""
    payload = {
        "identity": identity,
        "kind": "fit",
        "train": request.train.to_csv(index=False),
        "labels": list(request.labels),
        "test": request.test.to_csv(index=False),
        "kinds": [list(kind) for kind in request.kinds],
        "seed": request.seed,
    }
    return _digest(payload)


def _digest(payload: dict[str, object]) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    """A stored answer and the usage its provider reported when it was asked (empty if none)."""

    text: str
    usage: dict[str, int]


class ResponseCache:
    """A persistent map from cache key to completion text, safe across threads and processes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        # Processes that open a new cache at once (a grid's first cells) take turns: SQLite
        # answers a second change to WAL mode "database is locked" at once, not after its
        # timeout (6 processes opening a new file together failed in 12 of 40 tries).
        with self._lock, FileLock(f"{self.path}.lock", timeout=600):
            self._conn.execute("PRAGMA journal_mode=WAL")
            # Each commit reaches the OS at once, so a killed process loses nothing; not
            # waiting for the disk (about 9 ms a commit) keeps the answers of concurrent
            # workers from queueing. A power cut may lose the last answers, never the store.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses ("
                "key TEXT PRIMARY KEY, model TEXT, text TEXT, "
                "created REAL DEFAULT (unixepoch('subsec')))"
            )
            self._add_usage_column()
            self._conn.commit()

    def _add_usage_column(self) -> None:
        """Caches written before usage was recorded get the column (another process may add
        it at the same moment)."""
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(responses)")}
        if "usage" in columns:
            return
        try:
            self._conn.execute("ALTER TABLE responses ADD COLUMN usage TEXT")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise

    def get(self, key: str) -> str | None:
        entry = self.get_entry(key)
        return None if entry is None else entry.text

    def get_entry(self, key: str) -> CachedAnswer | None:
        """The stored answer with its reported usage, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT text, usage FROM responses WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        return CachedAnswer(row[0], json.loads(row[1]) if row[1] else {})

    def put(self, key: str, model: str, text: str, usage: dict[str, int] | None = None) -> None:
        """Store one answer and commit at once, so a crashed or killed process never loses it."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, model, text, usage) VALUES (?, ?, ?, ?)",
                (key, model, text, json.dumps(usage) if usage else None),
            )
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
