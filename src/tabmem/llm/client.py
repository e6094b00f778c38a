"""A backend made fit for a grid: cached, concurrent, retried, with a progress bar."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from tabmem.errors import TransientProviderError
from tabmem.llm.base import Backend, Request, Response
from tabmem.llm.cache import ResponseCache, cache_key


@dataclass
class CallStats:
    """How a batch of queries was answered: fresh calls, cache hits, retries, failures."""

    model_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        return {
            "model_calls": self.model_calls,
            "cache_hits": self.cache_hits,
            "retries": self.retries,
            "failed_calls": self.failures,
        }


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


class LanguageModel:
    """One model as the tests see it: ``run`` answers a list of requests in order."""

    def __init__(
        self,
        backend: Backend,
        name: str,
        prompt_form: str = "chat",
        context_window: int = 4096,
        cache: ResponseCache | None = None,
        max_concurrency: int = 1,
        retry: RetryPolicy | None = None,
        show_progress: bool = True,
    ) -> None:
        self.backend = backend
        self.name = name
        self.prompt_form = prompt_form
        self.context_window = context_window
        self.cache = cache
        self.max_concurrency = max(1, max_concurrency)
        self.retry = retry or RetryPolicy()
        self.show_progress = show_progress
        self.stats = CallStats()

    def count_tokens(self, text: str) -> int:
        """Tokens as the backend counts them, else a cautious estimate of one per 3 characters."""
        counted = self.backend.count_tokens(text)
        return counted if counted is not None else len(text) // 3 + 1

    def tokenize(self, text: str) -> list[str] | None:
        """``text`` in the model's own tokens, or None for models that do not expose them."""
        return self.backend.tokenize(text)

    def run(self, requests: Sequence[Request], description: str = "queries") -> list[Response]:
        """Answer every request; failures become responses with ``error`` set, never exceptions."""
        if not requests:
            return []
        with self._progress() as progress:
            task = progress.add_task(f"{self.name}: {description}", total=len(requests))

            def answer(request: Request) -> Response:
                response = self._answer(request)
                progress.advance(task)
                return response

            if self.max_concurrency == 1:
                return [answer(r) for r in requests]
            with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
                return list(pool.map(answer, requests))

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            disable=not self.show_progress,
            transient=True,
        )

    def _answer(self, request: Request) -> Response:
        key = cache_key(self.backend.identity, request)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.add(cache_hits=1)
                return Response(text=hit, cached=True)
        response = self._call_with_retries(request)
        if response.error is None and self.cache is not None:
            self.cache.put(key, self.name, response.text)
        return response

    def _call_with_retries(self, request: Request) -> Response:
        attempt = 0
        while True:
            self.stats.add(model_calls=1)
            try:
                if request.messages is not None:
                    text = self.backend.chat(list(request.messages), request.params)
                else:
                    text = self.backend.complete(request.prompt or "", request.params)
                return Response(text=text or "")
            except TransientProviderError as exc:
                if attempt >= self.retry.max_retries:
                    self.stats.add(failures=1)
                    return Response(text="", error=f"gave up after {attempt + 1} tries: {exc}")
                self.stats.add(retries=1)
                time.sleep(self.retry.delay(attempt, exc.retry_after))
                attempt += 1
            except Exception as exc:
                self.stats.add(failures=1)
                return Response(text="", error=f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        self.backend.close()
