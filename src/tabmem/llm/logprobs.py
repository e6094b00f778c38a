"""Per-token log-probabilities of texts, read through the model's response cache.

The log-probability tests (``test=min_k_prob``, ``test=row_order``) ask a model how likely a
text is after a context. Backends that run the weights themselves can answer (``llama_cpp``,
``transformers``, ``vllm``), and a served model whose config declares ``prompt_logprobs``
(``tabmem.llm.litellm_backend``); for the others ``score_texts`` returns None and the test is
``not_applicable``. Scores are cached like completions, under a key that holds the backend's
identity, the context and the text, so a re-run asks nothing again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from tabmem.errors import RetryPolicy
from tabmem.llm.base import LOGPROBS, LogprobBackend, capabilities_of
from tabmem.llm.cache import ResponseCache

DEFAULT_BATCH = 8


Answered = TypeVar("Answered")
Asked = TypeVar("Asked")


class ScoringModel(Protocol):
    """What scoring asks of a model (``tabmem.llm.client.LanguageModel`` has it all): its
    backend, name, cache, counters (``stats.add``) and whether to show progress."""

    backend: Any
    name: str
    cache: ResponseCache | None
    stats: Any
    show_progress: bool


@dataclass(frozen=True)
class ScoreRequest:
    """Score ``text`` (every one of its tokens) as read right after ``context``."""

    text: str
    context: str = ""


@dataclass
class ScoreResponse:
    """The log-probability of each token of the text, or the reason there are none."""

    logprobs: list[float] = field(default_factory=list)
    cached: bool = False
    error: str | None = None

    @property
    def total(self) -> float:
        """The text's log-likelihood: the sum over its tokens."""
        return float(sum(self.logprobs))


def has_logprobs(backend: Any) -> bool:
    """Whether a backend can score text (``tabmem.llm.base.capabilities_of``)."""
    return LOGPROBS in capabilities_of(backend)


def no_logprobs_reason(model: ScoringModel) -> str:
    """The sentence a test records when the model cannot score text."""
    provider = model.backend.identity.get("provider", "this")
    served = ""
    if provider == "litellm":
        served = ", or declare prompt_logprobs in its config if a vLLM server serves it"
    return (
        f"model '{model.name}' ({provider} backend) gives no log-probabilities; run a "
        f"llama_cpp, transformers or vllm model (for instance model=smollm2-135m){served}"
    )


def score_key(identity: dict[str, str], request: ScoreRequest) -> str:
    """A cache key that no completion key can equal: the kind 'logprobs' is part of it."""
    payload = {"identity": identity, "kind": "logprobs", "context": request.context}
    payload["text"] = request.text
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _scorer(backend: LogprobBackend) -> Callable[[list[tuple[str, str]]], list[list[float]]]:
    batch = getattr(backend, "logprobs_batch", None)
    if callable(batch):
        return batch
    return lambda items: [backend.logprobs(text, context) or [] for context, text in items]


def score_texts(
    model: ScoringModel, requests: Sequence[ScoreRequest], description: str
) -> list[ScoreResponse] | None:
    """Score every request, in order; None when the backend cannot score text.

    A batch that fails gives responses with ``error`` set (the test counts them as failed
    queries); it never raises.
    """
    backend = model.backend
    if not has_logprobs(backend):
        return None
    keys = [score_key(backend.identity, r) for r in requests]
    out, todo = split_cached(model, keys, requests, lambda v: ScoreResponse(v, cached=True))
    out.update(_score_uncached(model, list(todo.items()), description))
    return [out[key] for key in keys]


def split_cached(
    model: ScoringModel,
    keys: Sequence[str],
    requests: Sequence[Asked],
    decode: Callable[[Any], Answered],
    texts: Callable[[Asked], int] = lambda _: 1,
) -> tuple[dict[str, Answered], dict[str, Asked]]:
    """The requests the cache answers (decoded, each counted as ``texts`` cache hits: the
    texts it scores) and the others, each key once: what a scoring call sends to the backend
    is only the second part."""
    out: dict[str, Answered] = {}
    todo: dict[str, Asked] = {}
    for key, request in zip(keys, requests, strict=True):
        if key in out or key in todo:
            continue
        hit = model.cache.get(key) if model.cache is not None else None
        if hit is None:
            todo[key] = request
        else:
            model.stats.add(cache_hits=texts(request))
            out[key] = decode(json.loads(hit))
    return out, todo


def scoring_progress(model: ScoringModel) -> Progress:
    """The progress bar scoring calls run under (hidden where the model shows none)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        disable=not model.show_progress,
        transient=True,
    )


def _score_uncached(
    model: ScoringModel, todo: list[tuple[str, ScoreRequest]], description: str
) -> dict[str, ScoreResponse]:
    scorer = _scorer(model.backend)

    def accept(
        chunk: list[tuple[str, ScoreRequest]], values: list[Any]
    ) -> dict[str, ScoreResponse]:
        found = {}
        for (key, _), logprobs in zip(chunk, values, strict=True):
            found[key] = ScoreResponse([float(v) for v in logprobs])
            if model.cache is not None:
                model.cache.put(key, model.name, json.dumps(found[key].logprobs))
        return found

    return in_batches(model, todo, description, scorer, accept, lambda e: ScoreResponse(error=e))


def in_batches(
    model: ScoringModel,
    todo: list[tuple[str, ScoreRequest]],
    description: str,
    fetch: Callable[[list[tuple[str, str]]], Sequence[Any]],
    accept: Callable[[list[tuple[str, ScoreRequest]], Sequence[Any]], dict[str, Answered]],
    failed: Callable[[str], Answered],
) -> dict[str, Answered]:
    """``todo`` in batches of the backend's ``batch_size``, under a progress bar: each batch's
    (context, text) pairs sent to ``fetch`` (counted as model calls), its values handed to
    ``accept``; a batch ``fetch`` fails answers each of its requests with ``failed(error)``
    (counted as failures), so scoring never raises for the backend. A transient failure (a
    served model's 429 or 5xx) is tried again as a completion is, under the model's
    ``retry`` policy where it has one."""
    size = max(1, int(getattr(model.backend, "batch_size", DEFAULT_BATCH)))
    found: dict[str, Answered] = {}
    with scoring_progress(model) as progress:
        task = progress.add_task(f"{model.name}: {description}", total=len(todo))
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            try:
                values = _fetched(model, fetch, [(r.context, r.text) for _, r in chunk])
            except Exception as exc:
                model.stats.add(failures=len(chunk))
                error = f"{type(exc).__name__}: {exc}"
                found.update({key: failed(error) for key, _ in chunk})
            else:
                found.update(accept(chunk, values))
            progress.advance(task, len(chunk))
    return found


def _fetched(
    model: ScoringModel,
    fetch: Callable[[list[tuple[str, str]]], Sequence[Any]],
    pairs: list[tuple[str, str]],
) -> Sequence[Any]:
    """``fetch(pairs)``, each try counted as model calls, a transient failure tried again
    after the backoff of the model's retry policy until it has none left."""
    policy = getattr(model, "retry", None) or RetryPolicy(max_retries=0)

    def once() -> Sequence[Any]:
        model.stats.add(model_calls=len(pairs))
        return fetch(pairs)

    return policy.run(once, lambda _: model.stats.add(retries=len(pairs)))
