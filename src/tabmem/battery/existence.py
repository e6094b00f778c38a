"""Existence probe (Silvestri et al. 2025): which of five versions of a record is the real one?

For a random record, ``change_fraction`` of its attributes (one at least), drawn among the
highest-entropy attributes, take other values in four copies: each copy takes them from one
donor row of the file, so values keep their range and format and the five versions differ on
exactly those attributes, all five values of each distinct (no version is the odd one out or
the consensus). The model sees the five in random order and answers with a letter. Accuracy
is compared with chance (one in five), one-sided binomial.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from tabmem.battery.base import TestContext, register
from tabmem.battery.choice_probe import (
    ChoiceQuestion,
    ask_and_score,
    shuffle_options,
    source_phrase,
)
from tabmem.battery.completion_choice import hidden_count
from tabmem.prompts.choices import Option, option_block
from tabmem.prompts.probe_records import ValueTable, altered_copies, hidden_attributes
from tabmem.results import TestResult
from tabmem.stats.neighbours import NeighbourModel
from tabmem.stats.probes import attribute_pool, log_frequency

TEST = "existence"


def _question(
    table: ValueTable,
    model: NeighbourModel,
    row: int,
    changed: list[int],
    copies: list[tuple[str, ...]],
    p: Mapping[str, Any],
    source: str,
    rng: random.Random,
) -> ChoiceQuestion:
    versions = [table.rows[row], *copies]
    options = [Option(table.text(v)) for v in versions]
    scores = [sum(log_frequency(table.counts[j], v[j]) for j in changed) for v in versions]
    every = list(range(len(table.names)))
    rule = model.choice_scores(
        [dict(enumerate(v)) for v in versions], [every] * len(versions), exclude=[row]
    )
    shuffled = shuffle_options(options, scores, rng)
    text = str(p["question"]).format(source=source, options=option_block(shuffled.options))
    extra = {"row": row + 1, "changed": [table.names[j] for j in changed]}
    return ChoiceQuestion(
        text, shuffled.options, shuffled.correct, shuffled.scores, shuffled.reorder(rule), extra
    )


def existence_questions(
    table: ValueTable, p: Mapping[str, Any], pool: list[int], source: str, rng: random.Random
) -> tuple[list[ChoiceQuestion], int]:
    """Up to ``n_queries`` questions on records drawn without replacement, and how many draws
    were dropped (values not all distinct, or a copy that is a row of the file)."""
    n_queries, k = int(p.get("n_queries", 40)), int(p.get("n_options", 5)) - 1
    n_changed = hidden_count(len(table.names), float(p.get("change_fraction", 0.2)))
    model = NeighbourModel(table.rows)
    questions: list[ChoiceQuestion] = []
    dropped = 0
    for row in rng.sample(range(len(table.rows)), len(table.rows)):
        if len(questions) >= n_queries:
            break
        changed = hidden_attributes(table.rows[row], pool, n_changed, rng)
        copies = altered_copies(table, row, changed, k, rng)
        if copies is None:
            dropped += 1
            continue
        questions.append(_question(table, model, row, changed, copies, p, source, rng))
    return questions, dropped


@register(TEST)
def run_existence(ctx: TestContext) -> TestResult:
    """Show a real record among four altered copies; ask which one is in the dataset."""
    p = ctx.params
    table = ValueTable.from_dataset(ctx.dataset)
    n_options = int(p.get("n_options", 5))
    n_changed = hidden_count(len(table.names), float(p.get("change_fraction", 0.2)))
    pool = attribute_pool(table.columns, n_changed, n_options, float(p.get("pool_fraction", 0.5)))
    info: dict[str, Any] = {"attribute_pool": [table.names[j] for j in pool]}
    if not pool or len(table.rows) < n_options:
        return TestResult.not_applicable(
            TEST, f"no attribute has {n_options} distinct values over {n_options} rows", info=info
        )
    rng = random.Random(f"{TEST}:{ctx.seed}")
    questions, dropped = existence_questions(table, p, pool, source_phrase(ctx.dataset, p), rng)
    if not questions:
        return TestResult.not_applicable(
            TEST, "no record gave four distinct altered copies", info=info
        )
    metrics = {"changed_per_record": n_changed, "record_draws_dropped": dropped}
    return ask_and_score(ctx, TEST, questions, metrics, info)
