"""Errors meant for people: one sentence that says what went wrong and what to do; and the
one way a transient provider failure is tried again."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class TabmemError(Exception):
    """A problem the user can fix (missing file, unknown name, missing key).

    The message is a single sentence shown as-is, without a traceback.
    """


class DatasetError(TabmemError):
    """A dataset is missing, unreadable or malformed."""


class ConfigError(TabmemError):
    """A configuration names something that does not exist or is inconsistent."""


class ProviderError(TabmemError):
    """A model provider cannot be used (missing key, missing base URL, missing package)."""


class TransientProviderError(Exception):
    """A provider failure worth retrying (timeout, 429, 5xx, dropped connection).

    ``retry_after`` is the server's requested wait in seconds, when it sent one.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter; a server's Retry-After is obeyed when longer."""

    max_retries: int = 4
    base_delay: float = 1.0
    max_delay: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        backoff = min(self.max_delay, self.base_delay * (2**attempt))
        backoff *= 0.5 + random.random() / 2
        return max(backoff, retry_after or 0.0)

    def run(self, once: Callable[[], T], retrying: Callable[[TransientProviderError], None]) -> T:
        """``once()``, tried again after the backoff while it raises a
        ``TransientProviderError`` (``retrying`` told of each) and tries are left; the last
        failure is raised."""
        attempt = 0
        while True:
            try:
                return once()
            except TransientProviderError as exc:
                if attempt >= self.max_retries:
                    raise
                retrying(exc)
                time.sleep(self.delay(attempt, exc.retry_after))
                attempt += 1
