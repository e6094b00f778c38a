"""The one interface every backend implements, and the request types it takes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from tabmem.llm.stopping import StopRule

Message = dict[str, str]


@dataclass(frozen=True)
class GenerationParams:
    """Everything that shapes a generation; all of it is part of the cache key.

    ``stop_rule`` ends the answer once its score is settled (``tabmem.llm.stopping``); it is in
    the key only when set, so answers cached without one keep their keys.
    """

    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int = 0
    stop_rule: StopRule | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        if self.stop_rule is None:
            del d["stop_rule"]
        else:
            d["stop_rule"] = self.stop_rule.as_dict()
        return d


@dataclass(frozen=True)
class Request:
    """One query: chat ``messages`` or a plain ``prompt``, with its parameters.

    ``sample_index`` tells apart repeated draws of the same prompt at temperature > 0.
    """

    params: GenerationParams
    messages: tuple[Message, ...] | None = None
    prompt: str | None = None
    sample_index: int = 0

    @property
    def kind(self) -> str:
        return "chat" if self.messages is not None else "complete"

    def as_text(self) -> str:
        """The request as readable text, for logs and query tables."""
        if self.messages is None:
            return self.prompt or ""
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages)


@dataclass
class Response:
    """A backend's answer, or the reason there is none; ``detail`` holds what a fitted
    baseline chose (hyperparameters, folds); ``reasoning`` a reasoning model's thoughts, cut
    off the answer (``tabmem.llm.reasoning``)."""

    text: str
    cached: bool = False
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    reasoning: str = ""


@dataclass(frozen=True)
class FitRequest:
    """A statistical baseline's question: fit on ``train`` with ``labels`` (columns of the
    given ``kinds``), then label row ``row`` of ``test``. Requests that share their ``train``,
    ``test`` and ``seed`` objects share one fit. ``prompt`` is what a record shows."""

    train: Any
    labels: tuple[str, ...]
    test: Any
    kinds: tuple[tuple[str, str], ...]
    seed: int
    row: int
    prompt: str


@runtime_checkable
class Backend(Protocol):
    """A language model: ``chat`` for instruction models, ``complete`` for plain text.

    ``identity`` names the model precisely enough that two backends with equal
    identities give the same answers (provider, model, api_base, weights hash);
    it is part of every cache key.
    """

    identity: dict[str, str]

    def chat(self, messages: list[Message], params: GenerationParams) -> str: ...

    def complete(self, prompt: str, params: GenerationParams) -> str: ...

    def count_tokens(self, text: str) -> int | None:
        """Tokens in ``text`` as this model counts them, or None when unknown."""
        ...

    def tokenize(self, text: str) -> list[str] | None:
        """``text`` split into this model's tokens (as strings), or None when unknown."""
        ...

    def close(self) -> None: ...


class BaseBackend:
    """What most backends share: no tokenizer to offer (counts and tokens unknown) and nothing
    to release. A backend subclasses it and overrides what it has."""

    identity: dict[str, str]

    def count_tokens(self, text: str) -> int | None:
        return None

    def tokenize(self, text: str) -> list[str] | None:
        return None

    def close(self) -> None:
        return None


def after_bos(ids: list[int], bos: int | None) -> list[int]:
    """A scored context's token ids after the model's BOS token, where it has one and the ids
    do not start with it: every backend that scores text reads a context the same way."""
    return ids if bos is None or ids[:1] == [bos] else [bos, *ids]


@runtime_checkable
class LogprobBackend(Protocol):
    """A backend that can also score text (optional; the log-probability tests need it).

    ``logprobs`` gives the log-probability of each of ``text``'s tokens, read after
    ``context``; None when this model cannot give them. A backend may add
    ``logprobs_batch(items: list[tuple[str, str]])`` ((context, text) pairs) to score many at once.
    """

    def logprobs(self, text: str, context: str = "") -> list[float] | None: ...


@runtime_checkable
class MomentsBackend(Protocol):
    """A backend that scores text with the whole vocabulary's distribution in hand (optional;
    Min-K%++ needs it): for each (context, text) pair, one ``(logprob, mean, sd)`` triple per
    token of the text, where ``mean`` and ``sd`` are the expectation and the standard deviation
    of log p(z) for z drawn from the model's distribution at that token's position."""

    def logprob_moments_batch(
        self, items: list[tuple[str, str]]
    ) -> list[list[tuple[float, float, float]]]: ...


GENERATE = "generate"
LOGPROBS = "logprobs"
TOKEN_MOMENTS = "token_moments"
FIT = "fit"


def capabilities_of(backend: Any) -> frozenset[str]:
    """What a backend can do: ``generate`` (write text), ``logprobs`` (score text),
    ``token_moments`` (score text with each position's distribution summarised, a
    ``MomentsBackend``), ``fit`` (a statistical baseline, fitted on rows instead of prompted). A
    backend states its own in a ``capabilities`` attribute; without one it generates, and scores
    text when it has a ``logprobs`` method (``supports_logprobs = False`` says a server gives
    none)."""
    declared = getattr(backend, "capabilities", None)
    if declared is not None:
        return frozenset(declared)
    scores = callable(getattr(backend, "logprobs", None)) and bool(
        getattr(backend, "supports_logprobs", True)
    )
    if not scores:
        return frozenset({GENERATE})
    if callable(getattr(backend, "logprob_moments_batch", None)):
        return frozenset({GENERATE, LOGPROBS, TOKEN_MOMENTS})
    return frozenset({GENERATE, LOGPROBS})
