"""Locate a transcript's lines in the dataset, then score and decide as a live run does."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, Recorded, Rescorable
from tabmem.errors import DatasetError
from tabmem.llm.base import Response
from tabmem.results import TestResult

REASONS_SHOWN = 5


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
            f"({reasons or 'the file is empty'})."
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
