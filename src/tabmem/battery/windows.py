"""The window kind of test: a prompt of contiguous rows from a seeded place in the file,
the row after them as the answer. Row completion and first token ask with the same
windows, word them alike and find a recorded window in the file the same way."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import F, Recorded, Rescorable, Worded
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.csvtext import split_records
from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.stopping import StopRule
from tabmem.prompts.fewshot import chat_messages, few_shot_datasets, fit_to_context
from tabmem.stats.independence import RowOrder, row_order_check, text_neighbours


@dataclass(frozen=True)
class WindowSettings(TestSettings):
    """``conf/shared/windows.yaml``: the windows row completion and first token both ask."""

    n_queries: int
    prefix_rows: int
    alpha: float
    weak_alpha: float
    min_hits: int
    order_permutations: int
    extra_tokens: int
    stop_after_first_row: bool
    few_shot: int
    few_shot_pool: list[str]
    system_prompt: str


@dataclass(frozen=True)
class Window:
    """The rows before data row ``target`` (0-based) as the prompt; that row as the answer."""

    target: int
    prefix: str
    expected: str


def window(dataset: Dataset, target: int, prefix_rows: int) -> Window:
    """The window ending before data row ``target`` (0-based), rows as written in the file."""
    rows = dataset.rows
    shown = rows[target - prefix_rows : target]
    return Window(target, "".join(r + dataset.newline for r in shown), rows[target])


def target_positions(n_rows: int, prefix_rows: int, n: int, seed: int) -> list[int]:
    """``n`` distinct target rows at seeded random places; the first ``n`` of one shuffle, so
    a larger ``n`` keeps the smaller one's targets (and their cached answers)."""
    candidates = list(range(prefix_rows, n_rows))
    random.Random(seed).shuffle(candidates)
    return candidates[:n]


def window_positions(ctx: TestContext) -> list[int]:
    """The target rows of this cell's window queries (shared by row completion and first token)."""
    prefix_rows = ctx.params.prefix_rows
    n = ctx.params.n_queries
    return target_positions(len(ctx.dataset.rows), prefix_rows, n, ctx.seed)


def word_windows(ctx: TestContext, windows: Sequence[Window]) -> Worded[Window]:
    """Requests for the windows; chat gets fixed few-shot windows from other datasets (the
    same for every query, so local models reuse their prompt cache)."""
    p = ctx.params
    prefix_rows = p.prefix_rows
    model = ctx.model_for("Wording")
    chat = model.prompt_form == "chat"
    rng = random.Random(ctx.seed + 1)
    examples = few_shot_datasets(ctx.dataset, p.few_shot_pool, p.few_shot, rng) if chat else []
    shots = [
        window(d, rng.randrange(prefix_rows, len(d.rows)), prefix_rows)
        for d in examples
        if len(d.rows) > prefix_rows
    ]
    worded: Worded[Window] = Worded([], [])
    dropped = skipped = 0
    first_row_rule = (
        StopRule.first_row(ctx.dataset.header, ctx.dataset.delimiter)
        if p.stop_after_first_row
        else None
    )
    for win in windows:
        params = GenerationParams(
            max_tokens=model.count_tokens(win.expected) + p.extra_tokens,
            temperature=0.0,
            seed=ctx.seed,
            stop_rule=first_row_rule,
        )

        def build(kept: int, win: Window = win, params: GenerationParams = params) -> Request:
            if not chat:
                return Request(params=params, prompt=win.prefix)
            pairs = [(s.prefix, s.expected) for s in shots[:kept]]
            messages = chat_messages(p.system_prompt, pairs, win.prefix)
            return Request(params=params, messages=messages)

        fitted = fit_to_context(build, len(shots), model.count_tokens, model.context_window, params)
        if fitted.request is None:
            skipped += 1
            continue
        dropped += fitted.dropped_examples
        worded.requests.append(fitted.request)
        worded.queries.append(win)
    worded.context = {
        "few_shot_datasets": [d.name for d in examples],
        "few_shot_examples": len(examples),
        "few_shot_examples_dropped": dropped,
        "windows_skipped": skipped,
    }
    return worded


def locate_window(dataset: Dataset, recorded: Recorded) -> Window | str:
    """The window a recorded prefix shows: its rows found one after another in the file (a
    header line first is ignored), the row after them its target. A recorded suffix must
    begin with that row."""
    shown = [r for r in split_records(recorded.prefix) if r.strip()]
    if shown and shown[0] == dataset.header:
        shown = shown[1:]
    if not shown:
        return "the prefix shows no data row"
    expected = next(iter(split_records(recorded.suffix)), "")
    rows = dataset.rows
    for start in _row_places(dataset).get(shown[0], []):
        target = start + len(shown)
        if target < len(rows) and rows[start:target] == shown:
            if expected and expected != rows[target]:
                continue
            return Window(target, "".join(r + dataset.newline for r in shown), rows[target])
    return "its rows, with a next row as recorded, do not occur in the file"


@lru_cache(maxsize=8)
def _row_places(dataset: Dataset) -> dict[str, list[int]]:
    """Where each row text occurs in the file (0-based data rows); built once per dataset, not
    once per located line."""
    places: dict[str, list[int]] = {}
    for i, row in enumerate(dataset.rows):
        places.setdefault(row, []).append(i)
    return places


class WindowTest(Rescorable[Window, F]):
    """The tests asked with windows of rows: row completion and first token share the
    windows, their wording and how a recorded window is found in the file."""

    nothing_fits = "no window fits the model's context window with its answer"

    def pick(self, ctx: TestContext) -> list[Window]:
        prefix_rows = ctx.params.prefix_rows
        return [window(ctx.dataset, t, prefix_rows) for t in window_positions(ctx)]

    def word(self, ctx: TestContext, queries: Sequence[Window], facts: F) -> Worded[Window]:
        return word_windows(ctx, queries)

    def locate(self, ctx: TestContext, recorded: Recorded) -> Window | str:
        return locate_window(ctx.dataset, recorded)


def too_short_reason(dataset: Dataset, params: WindowSettings) -> str:
    """Why the file is too short for window queries, or "" when it is long enough."""
    prefix_rows = params.prefix_rows
    if len(dataset.rows) <= prefix_rows:
        return (
            f"the file has {len(dataset.rows)} data rows, too few for a window of "
            f"{prefix_rows} rows and a row after it"
        )
    return ""


def row_order(ctx: TestContext) -> RowOrder:
    """The data-only check of row order, at the configured level and number of shuffles, on
    the values and on the rows' text (``stats.independence.text_neighbours``)."""
    permutations = ctx.params.order_permutations
    alpha = ctx.params.alpha
    if 1 / (permutations + 1) >= alpha:
        raise ConfigError(
            f"order_permutations={permutations} cannot give a p-value below alpha={alpha:g}; "
            f"use at least {int(1 / alpha)} shuffles (199 for alpha=0.01)."
        )
    values = row_order_check(
        ctx.dataset.frame, permutations=permutations, seed=ctx.seed, alpha=alpha
    )
    return values.with_text(text_neighbours(ctx.dataset.rows, seed=ctx.seed), alpha)
