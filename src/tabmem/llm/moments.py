"""Per-token log-probabilities with the moments of each position's distribution, read through
the model's response cache (what ``test=min_k_plus_plus`` asks).

Min-K%++ (Zhang et al. 2024) standardises a token's log-probability by the mean and standard
deviation of log p over the model's whole vocabulary at that position. Only a backend with the
logits in hand gives those moments (a ``MomentsBackend``, capability ``token_moments``:
transformers); on the others the test is ``not_applicable`` with ``no_moments_reason``.
Answers are cached under a key of their own kind, so a plain score never stands in for a score
with moments; the token log-probabilities of a score with moments are kept as the text's plain
score too (where none is cached yet), so the tests that score the same pairs without moments
(``zlib_ratio``, the model's side of ``reference_ratio``) ask nothing again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tabmem.llm.base import TOKEN_MOMENTS, capabilities_of
from tabmem.llm.logprobs import (
    ScoreRequest,
    ScoreResponse,
    ScoringModel,
    in_batches,
    score_key,
    split_cached,
)


@dataclass
class MomentResponse(ScoreResponse):
    """Each token's log-probability (``logprobs``) with the mean and standard deviation of log
    p over the vocabulary at its position, or the reason there are none."""

    means: list[float] = field(default_factory=list)
    sds: list[float] = field(default_factory=list)


def has_moments(backend: object) -> bool:
    """Whether a backend gives the moments of each position's distribution."""
    return TOKEN_MOMENTS in capabilities_of(backend)


def no_moments_reason(model: ScoringModel) -> str:
    """The sentence a test records when the model gives no moments: the generic one, and the
    backend's own reason where it states one (``moments_unavailable``)."""
    provider = model.backend.identity.get("provider", "this")
    why = getattr(model.backend, "moments_unavailable", "")
    return (
        f"model '{model.name}' ({provider} backend) gives no mean and spread of the "
        "log-probabilities over its vocabulary at each token, which Min-K%++ normalises by"
        + (f" ({why})" if why else "")
        + "; run a transformers model (for instance model=smollm2-135m-hf)"
    )


def moments_key(identity: dict[str, str], request: ScoreRequest) -> str:
    """A cache key that neither a completion's nor a plain score's key can equal."""
    payload = {"identity": identity, "kind": "logprob_moments", "context": request.context}
    payload["text"] = request.text
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _response(triples: Sequence[Sequence[float]], cached: bool = False) -> MomentResponse:
    return MomentResponse(
        logprobs=[float(t[0]) for t in triples],
        means=[float(t[1]) for t in triples],
        sds=[float(t[2]) for t in triples],
        cached=cached,
    )


def score_moments(
    model: ScoringModel, requests: Sequence[ScoreRequest], description: str
) -> list[MomentResponse]:
    """Score every request with its moments, in order: cached answers from the cache, the
    others in batches of the backend's ``batch_size`` (a backend that ``has_moments``). A
    batch that fails gives responses with ``error`` set; it never raises."""
    backend = model.backend
    keys = [moments_key(backend.identity, r) for r in requests]
    out, todo = split_cached(model, keys, requests, lambda v: _response(v, cached=True))
    scored = in_batches(
        model,
        list(todo.items()),
        description,
        model.backend.logprob_moments_batch,
        lambda chunk, values: _accept(model, chunk, values),
        lambda error: MomentResponse(error=error),
    )
    out.update(scored)
    return [out[key] for key in keys]


def _accept(
    model: ScoringModel, chunk: list[tuple[str, ScoreRequest]], values: Sequence[Any]
) -> dict[str, MomentResponse]:
    """One batch's triples as responses, cached; their log-probabilities also stand as the
    plain scores where none is cached."""
    found = {}
    for (key, request), triples in zip(chunk, values, strict=True):
        found[key] = _response(triples)
        if model.cache is not None:
            model.cache.put(key, model.name, json.dumps([list(t) for t in triples]))
            plain = score_key(model.backend.identity, request)
            if model.cache.get(plain) is None:
                model.cache.put(plain, model.name, json.dumps(found[key].logprobs))
    return found
