"""The answer printed at the end of a run or grid: one line per model × dataset, in the width of
the terminal, and on request (``detail=true``) every test of each.

A line holds the model × dataset's verdict (its dataset verdict where its tests of rows seen
were combined, else its one test's verdict), the p-value, the grid q-value, the tests that carry
it and the counts behind it. Columns are laid out here rather than by a table widget, so that no
word is ever broken inside a cell: where the line would be wider than the terminal, the list of
carrying tests is shortened to its first names and a count (``row_completion +3``); the detail
view names every test. Failures and skips are told once per distinct reason, with the cells they
hit.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from tabmem.report.dataset_verdicts import DatasetOutcome

PIPED_WIDTH = 100
"""The width of the summary when the output is no terminal and ``COLUMNS`` is not set."""
GAP = "  "
NONE = "-"
VERDICT_STYLE = {
    "evidence": "bold red",
    "ambiguous": "yellow",
    "no_evidence": "green",
    "not_applicable": "dim",
    "failed": "bold red",
    "skipped": "dim",
}
CELLS_NAMED = 4
"""A failure or skip reason names at most this many cells, then counts the rest."""


def summary_console() -> Console:
    """A console as wide as the terminal; piped, as wide as ``COLUMNS`` says, else 100."""
    tty = sys.stdout.isatty()
    return Console(width=None if tty or os.environ.get("COLUMNS") else PIPED_WIDTH)


def _p(value: float | None) -> str:
    return NONE if value is None else f"{value:.2g}"


def _group(outcome: Mapping[str, Any]) -> str:
    found = outcome.get("group")
    if found:
        return str(found)
    keys = ("model", "dataset", "transform", "seed")
    return "|".join(str(outcome.get(k, "")) for k in keys)


def _ran(outcome: Mapping[str, Any]) -> bool:
    """A test with a verdict: finished now, or earlier (skipped with its run)."""
    return outcome["status"] != "failed" and bool(outcome.get("verdict"))


@dataclass
class Answer:
    """One model × dataset (× transform × seed) of a run or grid, as its line shows it."""

    model: str
    dataset: str
    transform: str
    seed: int
    verdict: str
    p_value: float | None
    q_value: float | None
    carried_by: list[str]
    counts: str
    tests: list[Mapping[str, Any]] = field(default_factory=list)
    verdict_run: str = ""


def answers(
    outcomes: Sequence[Mapping[str, Any]], verdicts: Sequence[DatasetOutcome] = ()
) -> list[Answer]:
    """One answer per model × dataset that ran a test (or failed one), in the order the grid
    listed them; the model × datasets whose every test a grid skipped by its rules are left
    to the list of skips."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for outcome in outcomes:
        groups.setdefault(_group(outcome), []).append(outcome)
    combined = {(o.model, o.dataset, o.transform, o.seed): o for o in verdicts}
    found = []
    for members in groups.values():
        decided = [o for o in members if _ran(o)]
        failed = [o for o in members if o["status"] == "failed"]
        if not decided and not failed:
            continue
        first = members[0]
        key = (first["model"], first["dataset"], first["transform"], int(first.get("seed", 0)))
        dataset_verdict = combined.get(key)
        answer = Answer(
            first["model"],
            first["dataset"],
            first["transform"],
            key[3],
            NONE,
            None,
            None,
            [],
            _counts(members, decided, failed),
            members,
        )
        if not decided:
            answer.verdict = "failed"
        elif dataset_verdict is not None and dataset_verdict.verdict.combined:
            verdict = dataset_verdict.verdict
            answer.verdict = verdict.verdict.value
            answer.p_value, answer.q_value = verdict.p_value, dataset_verdict.q_value
            answer.carried_by = list(verdict.carried_by)
            answer.verdict_run = dataset_verdict.run_id
        else:
            alone = _own_answer(decided)
            if alone is not None:
                answer.verdict, answer.p_value = alone["verdict"], alone.get("p_value")
            answer.carried_by = [o["test"] for o in decided if o["verdict"] == "evidence"]
        found.append(answer)
    return found


def _own_answer(decided: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The test that answers for a model × dataset without a dataset verdict: its one test,
    or its one test of rows seen beside tests of other claims; None where there is none."""
    if len(decided) == 1:
        return decided[0]
    from tabmem.battery.base import claiming

    rows_seen = set(claiming("rows_seen"))
    ours = [o for o in decided if o["test"] in rows_seen]
    return ours[0] if len(ours) == 1 else None


def _counts(
    members: list[Mapping[str, Any]],
    decided: list[Mapping[str, Any]],
    failed: list[Mapping[str, Any]],
) -> str:
    """One test's hits of its queries; several tests: those with evidence of those that ran;
    then the failed and skipped ones."""
    if len(members) == 1 and decided:
        figure = str(decided[0].get("figure") or "")
        return f"{figure.split(' ')[0]} hits" if figure else NONE
    parts = []
    if decided:
        evidence = sum(o["verdict"] == "evidence" for o in decided)
        parts.append(f"{evidence}/{len(decided)} tests")
    if failed:
        parts.append(f"{len(failed)} failed")
    skipped = len(members) - len(decided) - len(failed)
    if skipped:
        parts.append(f"{skipped} skipped")
    return ", ".join(parts)


def names_within(names: Sequence[str], width: int) -> str:
    """``names`` joined by commas within ``width`` characters: all of them, else the first
    ones and how many more (``row_completion +3``), else their count."""
    if not names:
        return NONE
    full = ", ".join(names)
    if len(full) <= width:
        return full
    for k in range(len(names) - 1, 0, -1):
        text = f"{', '.join(names[:k])} +{len(names) - k}"
        if len(text) <= width:
            return text
    return f"{len(names)} tests"


def column_widths(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]


def _line(cells: Sequence[str], widths: Sequence[int], styles: Mapping[int, str]) -> Text:
    text = Text()
    for i, (cell, width) in enumerate(zip(cells, widths, strict=True)):
        if i:
            text.append(GAP)
        last = i == len(cells) - 1
        text.append(cell if last else cell.ljust(width), style=styles.get(i, ""))
    return text


def answer_table(found: Sequence[Answer], width: int) -> list[Text]:
    """The answers as lines of at most ``width`` characters where the terminal allows it,
    header first; a column of transforms or seeds only where they vary."""
    transforms = any(a.transform != "original" for a in found)
    seeds = len({a.seed for a in found}) > 1
    header = [
        "model",
        "dataset",
        *(["transform"] if transforms else []),
        *(["seed"] if seeds else []),
        "verdict",
        "p",
        "grid q",
        "counts",
        "carried by",
    ]
    rows = [
        [
            a.model,
            a.dataset,
            *([a.transform] if transforms else []),
            *([str(a.seed)] if seeds else []),
            a.verdict,
            _p(a.p_value),
            _p(a.q_value),
            a.counts,
            ", ".join(a.carried_by) or NONE,
        ]
        for a in found
    ]
    widths = column_widths(header, rows)
    fixed = sum(widths[:-1]) + len(GAP) * (len(widths) - 1)
    room = max(len(header[-1]), width - fixed)
    for row, a in zip(rows, found, strict=True):
        row[-1] = names_within(a.carried_by, room)
    widths = column_widths(header, rows)
    at = header.index("verdict")
    lines = [_line(header, widths, {i: "bold" for i in range(len(header))})]
    for row in rows:
        lines.append(_line(row, widths, {at: VERDICT_STYLE.get(row[at], "")}))
    return lines


def answer_notes(found: Sequence[Answer], verdicts: Sequence[DatasetOutcome]) -> list[str]:
    """What the columns mean, in as few lines as the answers need."""
    notes = [
        "verdict: the dataset verdict where two or more tests of rows seen were combined, else "
        "the one test's own; p: its p-value (combined); counts: tests with evidence of those "
        "that ran, or one test's hits of its queries; carried by: the tests that carry the "
        "verdict (Holm), else the tests with evidence."
    ]
    if any(a.verdict == NONE for a in found):
        notes.append(
            "A verdict '-' has no single answer: its tests claim other things than rows seen "
            "(detail=true lists each)."
        )
    family = max((o.q_family for o in verdicts), default=0)
    if family:
        from tabmem.stats.combine import grid_q_sentence

        notes.append(grid_q_sentence(family, verdicts[0].verdict.rule.alpha) + ".")
    return notes


def detail_table(outcomes: Sequence[Mapping[str, Any]], width: int) -> list[Text]:
    """Every test, grouped under its model × dataset: verdict, hits, p-value, calls, cost and
    run id."""
    priced = any(o.get("cost_usd") or o.get("unpriced_answers") for o in outcomes)
    header = ["test", "verdict", "hits", "p", "calls", "cached", *(["cost $"] if priced else [])]
    header.append("run id")
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for outcome in outcomes:
        groups.setdefault(_group(outcome), []).append(outcome)
    rows: list[list[str] | str] = []
    for members in groups.values():
        first = members[0]
        where = f"{first['model']} · {first['dataset']} · {first['transform']}"
        rows.append(where)
        for o in members:
            verdict = o.get("verdict") or o["status"]
            figure = str(o.get("figure") or "")
            rows.append(
                [
                    f"  {o['test']}",
                    "failed" if o["status"] == "failed" else verdict,
                    figure.split(" ")[0] if figure else NONE,
                    _p(o.get("p_value")),
                    str(o.get("model_calls", 0)),
                    str(o.get("cache_hits", 0)),
                    *([usd(o)] if priced else []),
                    str(o.get("run_id") or NONE)[:12],
                ]
            )
    cells = [r for r in rows if isinstance(r, list)]
    widths = column_widths(header, cells) if cells else [len(h) for h in header]
    lines = [_line(header, widths, {i: "bold" for i in range(len(header))})]
    for row in rows:
        if isinstance(row, str):
            lines.append(Text(row[:width] if len(row) > width else row, style="bold"))
        else:
            lines.append(_line(row, widths, {1: VERDICT_STYLE.get(row[1], "")}))
    return lines


def usd(outcome: Mapping[str, Any]) -> str:
    """A test's or cell's reported cost; '+?' where some answers came from a model with no
    price."""
    cost = f"{outcome.get('cost_usd', 0.0):.4f}"
    return f"{cost}+?" if outcome.get("unpriced_answers") else cost


def _cells(found: Sequence[Mapping[str, Any]]) -> str:
    """The model × datasets a reason hit, each with how many of its tests."""
    counts: dict[str, int] = {}
    for o in found:
        name = f"{o['model']} | {o['dataset']}"
        if o["transform"] != "original":
            name += f" | {o['transform']}"
        counts[name] = counts.get(name, 0) + 1
    named = [f"{name} ({n} test{'s' if n > 1 else ''})" for name, n in counts.items()]
    more = len(named) - CELLS_NAMED
    return "; ".join(named[:CELLS_NAMED]) + (f"; and {more} more" if more > 0 else "")


def problems(outcomes: Sequence[Mapping[str, Any]]) -> list[Text]:
    """Each distinct failure, then each distinct reason a grid skipped tests for, once, with
    the cells it hit."""
    lines = []
    for status, style in (("failed", "bold red"), ("skipped", "dim")):
        by_reason: dict[str, list[Mapping[str, Any]]] = {}
        for o in outcomes:
            if o["status"] == status and (status == "failed" or not o.get("run_id")):
                by_reason.setdefault(str(o.get("message", "")), []).append(o)
        for reason, found in by_reason.items():
            text = Text(status, style=style)
            text.append(f" {_cells(found)}: {reason}")
            lines.append(text)
    return lines
