"""A dry run's bill: the requests a cell would send, their tokens and their estimated cost.

In a dry run the model answers every request it has cached and records the others here
instead of sending them (the test sees them as failed queries). Prompt tokens are counted
with the model's own tokenizer where the backend has one, else with litellm's offline token
counter (tiktoken files shipped with litellm); the completion side is the request's
``max_tokens``, so the cost is an upper bound for the answers' length.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tabmem.llm.base import Request
from tabmem.llm.pricing import Price


@dataclass
class RequestPlan:
    """Totals of the requests a cell would send (``requests``) and those already cached."""

    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    max_completion_tokens: int = 0
    reasoning_tokens: int = 0  # the reasoning allowance within max_completion_tokens
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, prompt_tokens: int, max_tokens: int, reasoning_tokens: int = 0) -> None:
        """One unsent request; ``max_tokens`` includes a reasoning model's ``reasoning_tokens``."""
        with self._lock:
            self.requests += 1
            self.prompt_tokens += prompt_tokens
            self.max_completion_tokens += max_tokens
            self.reasoning_tokens += reasoning_tokens

    def add_cached(self) -> None:
        with self._lock:
            self.cached += 1

    def estimate_usd(self, price: Price | None) -> float | None:
        """The most the unsent requests can cost; None when the model has no price."""
        if price is None:
            return None
        return price.cost(self.prompt_tokens, self.max_completion_tokens)

    def as_dict(self, price: Price | None) -> dict[str, Any]:
        with self._lock:
            counts = {
                "requests": self.requests,
                "cached": self.cached,
                "prompt_tokens": self.prompt_tokens,
                "max_completion_tokens": self.max_completion_tokens,
                "reasoning_tokens": self.reasoning_tokens,
            }
        return {**counts, "estimated_usd": self.estimate_usd(price)}


def prompt_tokens(backend: Any, request: Request) -> int:
    """``request``'s prompt tokens: the backend's tokenizer, else litellm's token counter
    (which adds the chat format's per-message tokens)."""
    counted = backend.count_tokens(request.as_text())
    if counted is not None:
        return int(counted)
    import litellm

    from tabmem.llm.litellm_logs import say_once

    say_once()  # its tokenizer warning would come once per request
    model = str(getattr(backend, "model", "") or "gpt-4")
    if request.messages is not None:
        return int(litellm.token_counter(model=model, messages=list(request.messages)))
    return int(litellm.token_counter(model=model, text=request.prompt or ""))
