"""How the likelihood tests read a file: which rows they score, and the passes that score them.

**Which rows.** Every row of the file up to the test's cap (``n_rows``); above it a seeded
sample. A cap of at most ``MAX_PLACES`` rows is drawn row by row; a larger one as
``MAX_PLACES`` runs of consecutive rows at seeded places, so that a capped pass over a large
file reads each run's context once instead of once a row (``sample_rows``).

**Which context.** A file is read in order, so a row is scored after the rows before it. With
``window_tokens`` > 0 the file is read in passes (``tabmem.llm.passes``): the header, then a
stretch of rows in order, each pass at most ``window_tokens`` tokens long. A pass starts
``context_rows`` rows before the first row it scores and runs on while the window holds, so
every scored row is read after the header and at least ``context_rows`` rows before it (fewer
only at the top of the file), and after every row back to its pass's start; consecutive passes
overlap by those rows. A row whose twin or contrast row is scored beside it has that text read
in its place, after exactly the same prefix. With ``header_only``, every row and its other
texts are read after the header alone, many rows to a pass. With ``window_tokens`` = 0 each
row gets its own copy of the header and the ``context_rows`` rows before it, as the tests read
files before passes (slower: the context is read again for every row).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tabmem.data import Dataset
from tabmem.llm.logprobs import ScoreResponse, ScoringModel, no_logprobs_reason
from tabmem.llm.passes import PassRequest, score_passes

MAX_PLACES = 100
"""A sample of more rows than this is drawn as this many runs of consecutive rows."""


def sample_rows(n_file: int, n_rows: int, rng: np.random.Generator) -> list[int]:
    """The rows to score (0-based, in file order): all of them up to ``n_rows``; else a seeded
    sample of ``n_rows``, row by row up to ``MAX_PLACES``, as runs of consecutive rows above."""
    if n_rows >= n_file:
        return list(range(n_file))
    if n_rows <= MAX_PLACES:
        return sorted(rng.choice(n_file, size=n_rows, replace=False).tolist())
    return sorted(in_runs(n_file, n_rows, rng)[:n_rows])


def in_runs(n_file: int, n_rows: int, rng: np.random.Generator) -> list[int]:
    """Rows in runs of ``ceil(n_rows / MAX_PLACES)`` consecutive rows, the runs (aligned
    blocks of the file) in a seeded order; at least ``n_rows`` of them where the file has."""
    run = math.ceil(n_rows / MAX_PLACES)
    blocks = math.ceil(n_file / run)
    order = rng.permutation(blocks).tolist()
    rows = [r for b in order for r in range(b * run, min(n_file, (b + 1) * run))]
    return rows


def rows_sentence(scored: int, n_file: int, n_rows: int) -> str:
    """How the scored rows were chosen, in words."""
    if n_rows >= n_file:
        return f"all {n_file} rows of the file"
    if n_rows <= MAX_PLACES:
        return f"{scored} of the file's {n_file} rows, drawn with the seed (the cap, n_rows)"
    run = math.ceil(n_rows / MAX_PLACES)
    return (
        f"{scored} of the file's {n_file} rows (the cap, n_rows), drawn with the seed as runs "
        f"of {run} consecutive rows"
    )


@dataclass(frozen=True)
class RowTexts:
    """A data row (0-based) and the texts read in its place after the same prefix."""

    row: int
    others: tuple[str, ...]


@dataclass
class FileRead:
    """The passes that score a file's rows, and where each row's answers are: per row, the
    (pass, answer) of the row itself, then of each of its other texts; and the first data row
    of each row's context (the row itself where the context is the header alone)."""

    passes: list[PassRequest]
    slots: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    context_from: dict[int, int] = field(default_factory=dict)
    header: str = ""
    newline: str = "\n"

    def answers(self, scores: Sequence[Sequence[ScoreResponse]], row: int) -> tuple[Any, ...]:
        """A row's answers (its own, then its other texts') from the passes' answers."""
        return tuple(scores[p][slot] for p, slot in self.slots[row])

    def context_rows(self, row: int) -> int:
        """How many data rows a row is read after (besides the header)."""
        return row - self.context_from[row]

    def prompt(self, dataset: Dataset, row: int) -> str:
        """A row's context as text where it is short (at most five rows), else the header and
        the last five rows with the number left out before them."""
        start = self.context_from[row]
        shown = max(start, row - 5)
        left = f"[{shown - start} rows]{self.newline}" if shown > start else ""
        body = "".join(r + self.newline for r in dataset.rows[shown:row])
        return self.header + self.newline + left + body


def token_counter(model: ScoringModel) -> Callable[[str], int]:
    """How many tokens a text takes: the backend's count, or one per three characters where it
    counts none."""
    counter = getattr(model.backend, "count_tokens", None)

    def count(text: str) -> int:
        counted = counter(text) if callable(counter) else None
        return int(counted) if counted is not None else len(text) // 3 + 1

    return count


def read_file(
    dataset: Dataset,
    items: Sequence[RowTexts],
    count: Callable[[str], int],
    window: int,
    context_rows: int,
    header_only: bool = False,
) -> FileRead:
    """The passes that score ``items``' rows and other texts (see the module's docstring)."""
    rows, newline = dataset.rows, dataset.newline
    head = dataset.header + newline
    read = FileRead([], header=dataset.header, newline=newline)
    items = sorted(items, key=lambda item: item.row)
    if window <= 0:
        for item in items:
            start = item.row if header_only else max(0, item.row - context_rows)
            context = head + "".join(r + newline for r in rows[start : item.row])
            texts = (rows[item.row], *item.others)
            _add(read, PassRequest((context,), (), tuple((1, t) for t in texts)), [item], [start])
        return read
    sizes: dict[int, int] = {}

    def size(row: int) -> int:
        if row not in sizes:
            sizes[row] = count(rows[row]) + count(newline)
        return sizes[row]

    head_size = count(head) + 1  # and BOS
    if header_only:
        _header_passes(read, dataset, items, count, window - head_size)
        return read
    chunk: list[Any] = []  # start, end, members, tokens
    for item in items:
        r = item.row
        if chunk:
            start, end, members, used = chunk
            extra = sum(size(k) for k in range(end + 1, r + 1))
            if r - end - 1 <= context_rows and used + extra <= window:
                chunk = [start, r, [*members, item], used + extra]
                continue
            _trunk_pass(read, dataset, start, end, members)
        start = max(0, r - context_rows)
        used = head_size + sum(size(k) for k in range(start, r + 1))
        while used > window and start < r:
            used -= size(start)
            start += 1
        chunk = [start, r, [item], used]
    if chunk:
        _trunk_pass(read, dataset, *chunk[:3])
    return read


def _add(read: FileRead, request: PassRequest, items: list[RowTexts], starts: list[int]) -> None:
    """A pass whose answers are, per item in order, its row's then its other texts' (branches
    only), and the first context row of each item."""
    at = len(read.passes)
    read.passes.append(request)
    slot = 0
    for item, start in zip(items, starts, strict=True):
        width = 1 + len(item.others)
        read.slots[item.row] = tuple((at, slot + k) for k in range(width))
        read.context_from[item.row] = start
        slot += width


def _header_passes(
    read: FileRead,
    dataset: Dataset,
    items: Sequence[RowTexts],
    count: Callable[[str], int],
    room: int,
) -> None:
    """Rows and their other texts each read after the header alone, as many to a pass as
    ``room`` tokens hold (one at least)."""
    head = dataset.header + dataset.newline
    group: list[RowTexts] = []
    used = 0
    for item in items:
        texts = (dataset.rows[item.row], *item.others)
        cost = sum(count(t) for t in texts)
        if group and used + cost > room:
            _header_pass(read, dataset, head, group)
            group, used = [], 0
        group.append(item)
        used += cost
    if group:
        _header_pass(read, dataset, head, group)


def _header_pass(read: FileRead, dataset: Dataset, head: str, group: list[RowTexts]) -> None:
    branches = tuple((1, text) for item in group for text in (dataset.rows[item.row], *item.others))
    _add(read, PassRequest((head,), (), branches), group, [item.row for item in group])


def _trunk_pass(
    read: FileRead, dataset: Dataset, start: int, end: int, members: list[RowTexts]
) -> None:
    """The header and rows ``start``..``end`` in order; the members' rows scored where they
    stand, their other texts read in their places."""
    newline = dataset.newline
    pieces: list[str] = [dataset.header + newline]
    for k in range(start, end + 1):
        if k > start:
            pieces.append(newline)
        pieces.append(dataset.rows[k])

    def piece(row: int) -> int:
        return 1 + 2 * (row - start)

    scored = tuple(piece(item.row) for item in members)
    branches = tuple((piece(item.row), text) for item in members for text in item.others)
    at = len(read.passes)
    read.passes.append(PassRequest(tuple(pieces), scored, branches))
    branch = len(scored)
    for index, item in enumerate(members):
        own = [(at, index)]
        for _ in item.others:
            own.append((at, branch))
            branch += 1
        read.slots[item.row] = tuple(own)
        read.context_from[item.row] = start


@dataclass(frozen=True)
class RowRead:
    """The request of one query of a test that reads a file: its row in the shared read."""

    read: FileRead
    row: int


def scored_reads(
    model: ScoringModel, requests: Sequence[RowRead], description: str, moments: bool = False
) -> list[tuple[Any, ...]]:
    """Each request's answers (its row's, then its other texts'), the shared read's passes
    scored once; a model that scores no text stops the cell."""
    from tabmem.errors import ConfigError

    if not requests:
        return []
    read = requests[0].read
    scores = score_passes(model, read.passes, description, moments=moments)
    if scores is None:
        raise ConfigError(no_logprobs_reason(model))
    return [read.answers(scores, request.row) for request in requests]


def read_figures(read: FileRead, rows: Sequence[int], window: int) -> dict[str, float]:
    """What a result records of how its rows were read: the passes, the window, and the
    fewest and mean data rows of context a scored row had."""
    contexts = [read.context_rows(r) for r in rows] or [0]
    return {
        "passes": float(len(read.passes)),
        "window_tokens": float(window),
        "context_rows_min": float(min(contexts)),
        "context_rows_mean": float(np.mean(contexts)),
    }
