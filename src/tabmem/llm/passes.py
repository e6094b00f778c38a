"""Many texts scored in one forward pass: a file's rows with the rows before them as context,
and other texts (twin rows, contrast rows) read in a row's place after the same prefix.

A ``PassRequest`` is a sequence of pieces read in order (each tokenized apart, the first after
the model's BOS token, as a scored context starts), the pieces whose own tokens are scored, and
*branches*: texts read right after the first ``j`` pieces, in place of what follows them. One
pass over a stretch of a file (the header, then its rows) thus gives every row's
log-probabilities after all the rows before it, and a twin row branching at a row's place is
read after exactly the prefix its real row had.

A backend that runs the weights itself scores a pass in one go (``logprobs_pass``: the
transformers backend reads the prefix once and every branch beside it). Any other backend that
scores text gets each scored piece and branch as its own ``ScoreRequest`` whose context is the
text of the pieces before it, in file order, so an engine that keeps its last prompt (llama.cpp's
slots) evaluates only what is new. Both give the same log-probabilities where the pieces
tokenize alike whole and apart (they do where a row ends before a newline in the tokenizers
used here; the slow tests check it). Passes are cached whole, under a key of their own kind.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.llm.logprobs import (
    ScoreRequest,
    ScoreResponse,
    ScoringModel,
    has_logprobs,
    score_texts,
    scoring_progress,
    split_cached,
)
from tabmem.llm.moments import MomentResponse, has_moments, score_moments


@dataclass(frozen=True)
class PassRequest:
    """``pieces`` read in order (BOS before the first); the tokens of the pieces in ``scored``
    (by index) are scored; each branch ``(j, text)`` is ``text`` read after ``pieces[:j]``
    (1 <= j <= len(pieces)). The answers come in that order: the scored pieces, then the
    branches."""

    pieces: tuple[str, ...]
    scored: tuple[int, ...] = ()
    branches: tuple[tuple[int, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.pieces:
            raise ValueError("a pass needs at least one piece")
        if any(not 0 <= j < len(self.pieces) for j in self.scored):
            raise ValueError("a scored piece is not one of the pass's pieces")
        if any(not 1 <= j <= len(self.pieces) for j, _ in self.branches):
            raise ValueError("a branch must follow at least the first piece of its pass")

    def context(self, j: int) -> str:
        """The text read before piece ``j`` (or before a branch at ``j``)."""
        return "".join(self.pieces[:j])

    def texts(self) -> list[tuple[int, str]]:
        """Every scored text with the number of pieces read before it, in answer order."""
        return [(j, self.pieces[j]) for j in self.scored] + list(self.branches)

    def as_requests(self) -> list[ScoreRequest]:
        """The pass as one request per scored text, each with its prefix as context."""
        return [ScoreRequest(text, self.context(j)) for j, text in self.texts()]

    @property
    def size(self) -> int:
        """How many texts the pass scores."""
        return len(self.scored) + len(self.branches)


def has_passes(backend: Any) -> bool:
    """Whether a backend scores a whole pass itself (``logprobs_pass``)."""
    return callable(getattr(backend, "logprobs_pass", None)) and bool(
        getattr(backend, "supports_passes", True)
    )


def pass_key(identity: dict[str, str], request: PassRequest, moments: bool) -> str:
    """A cache key no completion or single score can equal (its kind names passes)."""
    payload = {
        "identity": identity,
        "kind": "pass_moments" if moments else "pass_logprobs",
        "pieces": list(request.pieces),
        "scored": list(request.scored),
        "branches": [[j, text] for j, text in request.branches],
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def score_passes(
    model: ScoringModel,
    passes: Sequence[PassRequest],
    description: str,
    moments: bool = False,
) -> list[list[ScoreResponse]] | None:
    """Each pass's answers (its scored pieces, then its branches), in order; with ``moments``,
    ``MomentResponse``s (a backend that ``has_moments``). None when the backend scores no text.
    A pass that fails answers each of its texts with ``error`` set; it never raises."""
    backend = model.backend
    if not has_logprobs(backend):
        return None
    if moments and not has_moments(backend):
        raise ValueError(f"model '{model.name}' gives no moments of its distributions")
    if not has_passes(backend):
        return _one_by_one(model, passes, description, moments)
    keys = [pass_key(backend.identity, p, moments) for p in passes]
    found, todo = split_cached(
        model,
        keys,
        passes,
        lambda values: [_response(v, moments, cached=True) for v in values],
        lambda request: request.size,
    )
    found.update(_run_passes(model, todo, description, moments))
    return [found[key] for key in keys]


def _one_by_one(
    model: ScoringModel, passes: Sequence[PassRequest], description: str, moments: bool
) -> list[list[ScoreResponse]]:
    """The passes as single requests, in the order of the file (at each place the piece, then
    the branches read in its place), so that an engine that keeps its last prompt reads each
    prefix once: what a backend without passes gets."""
    flat: list[ScoreRequest] = []
    where: list[list[int]] = []
    for request in passes:
        texts = request.texts()
        order = sorted(range(len(texts)), key=lambda i: (texts[i][0], i))
        places = [0] * len(texts)
        singles = request.as_requests()
        for i in order:
            places[i] = len(flat)
            flat.append(singles[i])
        where.append(places)
    scored = (score_moments if moments else score_texts)(model, flat, description)
    assert scored is not None  # has_logprobs was checked
    return [[scored[i] for i in places] for places in where]


def _run_passes(
    model: ScoringModel, todo: dict[str, PassRequest], description: str, moments: bool
) -> dict[str, list[ScoreResponse]]:
    """The passes the cache did not answer, one backend call each, under a progress bar that
    counts texts; each pass's answers are cached as they come."""
    found: dict[str, list[ScoreResponse]] = {}
    with scoring_progress(model) as progress:
        total = sum(p.size for p in todo.values())
        task = progress.add_task(f"{model.name}: {description}", total=total)
        for key, request in todo.items():
            model.stats.add(model_calls=request.size)
            try:
                [values] = model.backend.logprobs_pass([request], moments=moments)
                if len(values) != request.size:
                    raise ValueError(f"{len(values)} answers for a pass of {request.size} texts")
            except Exception as exc:
                model.stats.add(failures=request.size)
                error = f"{type(exc).__name__}: {exc}"
                failed = MomentResponse(error=error) if moments else ScoreResponse(error=error)
                found[key] = [failed] * request.size
            else:
                found[key] = [_response(v, moments) for v in values]
                _store(model, key, request, values, moments)
            progress.advance(task, request.size)
    return found


def _response(values: Sequence[Any], moments: bool, cached: bool = False) -> ScoreResponse:
    if not moments:
        return ScoreResponse([float(v) for v in values], cached=cached)
    return MomentResponse(
        logprobs=[float(t[0]) for t in values],
        means=[float(t[1]) for t in values],
        sds=[float(t[2]) for t in values],
        cached=cached,
    )


def _store(
    model: ScoringModel, key: str, request: PassRequest, values: Sequence[Any], moments: bool
) -> None:
    """A pass's answers in the cache; with moments, also as the same pass without them (where
    none is cached), so the tests that score the same pass plainly ask nothing again."""
    cache = model.cache
    if cache is None:
        return
    if not moments:
        cache.put(key, model.name, json.dumps([list(map(float, v)) for v in values]))
        return
    cache.put(key, model.name, json.dumps([[list(map(float, t)) for t in v] for v in values]))
    plain_key = pass_key(model.backend.identity, request, moments=False)
    if cache.get(plain_key) is None:
        plain = [[float(t[0]) for t in v] for v in values]
        cache.put(plain_key, model.name, json.dumps(plain))
