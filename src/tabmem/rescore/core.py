"""Locate a transcript's lines in the dataset, then score and decide as a live run does."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, Recorded, Rescorable
from tabmem.data import Dataset
from tabmem.data.values import normalize_value
from tabmem.errors import DatasetError
from tabmem.llm.base import Response
from tabmem.results import TestResult
from tabmem.stats.uniqueness import text_columns

REASONS_SHOWN = 5
STRANGE_SHARE = 0.5
"""A column whose shown values the file's column never takes in at least this share of the lines
that show it holds something else than the file's values: a parsing artefact, most likely."""


@dataclass
class Located:
    """A transcript's lines split into the queries found in the dataset and those not found."""

    lines: int
    queries: list[tuple[Any, Recorded]]
    missing: Counter[str]


def locate_all(test: Rescorable[Any, Any], ctx: TestContext, lines: Sequence[Recorded]) -> Located:
    """Find every line's query in the dataset; count why the others were not found."""
    located = Located(len(lines), [], Counter())
    for line in lines:
        query = test.locate(ctx, line)
        if isinstance(query, str):
            located.missing[query] += 1
        else:
            located.queries.append((query, line))
    return located


def rescore(
    test: Rescorable[Any, Any], ctx: TestContext, lines: Sequence[Recorded]
) -> tuple[TestResult, Located]:
    """Locate the lines, fit the test's data-only facts for the located queries, score each
    recorded answer and decide, exactly as a live run scores and decides its own answers."""
    ctx = test.bind(ctx)
    located = locate_all(test, ctx, lines)
    if not located.queries:
        reasons = "; ".join(located.missing)
        raise DatasetError(
            f"None of the {len(lines)} lines of the transcript was found in {ctx.dataset.name} "
            f"({reasons or 'the file is empty'}).{strange_columns_advice(ctx.dataset, lines)}"
        )
    facts = test.prepare(ctx, [q for q, _ in located.queries])
    if isinstance(facts, TestResult):
        result = facts
    else:
        answers = [
            Answer(i, query, line.prompt, Response(text=line.response, error=line.error))
            for i, (query, line) in enumerate(located.queries)
        ]
        result = test.judge(ctx, facts, answers, {})
    result.metrics.update(
        {"transcript_lines": len(lines), "queries_not_located": sum(located.missing.values())}
    )
    if located.missing:
        shown = located.missing.most_common(REASONS_SHOWN)
        result.info["not_located"] = "; ".join(f"{n} × {reason}" for reason, n in shown)
    return result, located


@dataclass(frozen=True)
class StrangeColumn:
    """A column of the transcript whose shown values the file's column mostly never takes."""

    name: str
    strange: int
    shown: int
    example: str


def strange_columns(dataset: Dataset, lines: Sequence[Recorded]) -> list[StrangeColumn]:
    """The file's columns that the lines' ``Name = value`` questions show with values the
    column never takes (compared as values: ``25`` and ``25.0`` are one), in at least
    ``STRANGE_SHARE`` of the lines that show them, in the file's order."""
    known = {
        name: {normalize_value(v) for v in values} for name, values in text_columns(dataset).items()
    }
    shown: Counter[str] = Counter()
    strange: Counter[str] = Counter()
    example: dict[str, str] = {}
    for line in lines:
        for text in line.prefix.splitlines():
            name, sep, value = text.partition(" = ")
            name = name.strip()
            if not sep or name not in known:
                continue
            shown[name] += 1
            if normalize_value(value) not in known[name]:
                strange[name] += 1
                example.setdefault(name, value.strip())
    return [
        StrangeColumn(name, strange[name], shown[name], example[name])
        for name in known
        if shown[name] and strange[name] >= STRANGE_SHARE * shown[name]
    ]


def strange_columns_advice(dataset: Dataset, lines: Sequence[Recorded]) -> str:
    """Where no line was found: the columns that hold values the file never has, and how to
    leave them out (``--ignore-column``, or ``ignore_columns`` in a folder's mapping); '' when
    no column stands out."""
    found = strange_columns(dataset, lines)
    if not found:
        return ""
    said = "; ".join(
        f"column {c.name} shows values that {dataset.name}'s {c.name} never takes in {c.strange} "
        f"of {c.shown} lines (for instance {c.example[:60]!r})"
        for c in found
    )
    flags = " ".join(f"--ignore-column {c.name}" for c in found)
    them = "it holds" if len(found) == 1 else "they hold"
    return (
        f" {said[0].upper()}{said[1:]}: if {them} a parsing artefact, leave "
        f"{'it' if len(found) == 1 else 'them'} out with {flags} (in a folder's mapping: "
        "ignore_columns)."
    )
