"""Completion probe (Silvestri et al. 2025): pick a hidden value of a record among five.

For a random record, ``mask_fraction`` of its attributes (one at least) are hidden; they are
drawn among the highest-entropy attributes (``tabmem.stats.probes.attribute_pool``). For each
hidden attribute the model sees the record and five candidate values, the true one and four
taken from donor rows (``tabmem.prompts.probe_records``), in random order, and answers with a
letter. Accuracy is compared with chance (one in five), one-sided binomial.
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
from tabmem.prompts.choices import Option, option_block
from tabmem.prompts.probe_records import ValueTable, candidates, hidden_attributes
from tabmem.results import TestResult
from tabmem.stats.neighbours import NeighbourModel
from tabmem.stats.probes import attribute_pool, log_frequency

TEST = "completion_choice"


def hidden_count(n_attributes: int, fraction: float) -> int:
    """How many attributes of a record to hide: ``fraction`` of them, rounded, one at least."""
    return max(1, round(fraction * n_attributes))


def _question(
    table: ValueTable,
    model: NeighbourModel,
    row: int,
    attribute: int,
    hidden: list[int],
    values: list[str],
    p: Mapping[str, Any],
    source: str,
    rng: random.Random,
) -> ChoiceQuestion:
    name, mask = table.names[attribute], str(p.get("mask_token", "[hidden]"))
    options = [Option(f"{name} = {v}", v) for v in values]
    scores = [log_frequency(table.counts[attribute], v) for v in values]
    shown = {j: v for j, v in enumerate(table.rows[row]) if j not in hidden}
    rule = model.choice_scores(
        [{**shown, attribute: v} for v in values], [[attribute]] * len(values), exclude=[row]
    )
    shuffled = shuffle_options(options, scores, rng)
    text = str(p["question"]).format(
        source=source,
        mask=mask,
        record=table.text(table.rows[row], hidden, mask),
        feature=name,
        options=option_block(shuffled.options),
    )
    extra = {
        "row": row + 1,
        "attribute": name,
        "hidden": [table.names[j] for j in hidden],
        "true_value": values[0],
    }
    return ChoiceQuestion(
        text, shuffled.options, shuffled.correct, shuffled.scores, shuffled.reorder(rule), extra
    )


def completion_questions(
    table: ValueTable, p: Mapping[str, Any], pool: list[int], source: str, rng: random.Random
) -> tuple[list[ChoiceQuestion], int]:
    model = NeighbourModel(table.rows)
    """Up to ``n_queries`` questions over records drawn without replacement, and how many
    candidate draws were dropped (five values not all distinct and non-empty)."""
    n_queries, k = int(p.get("n_queries", 40)), int(p.get("n_options", 5)) - 1
    n_hidden = hidden_count(len(table.names), float(p.get("mask_fraction", 0.2)))
    questions: list[ChoiceQuestion] = []
    dropped = 0
    for row in rng.sample(range(len(table.rows)), len(table.rows)):
        hidden = hidden_attributes(table.rows[row], pool, n_hidden, rng)
        for attribute in hidden:
            if len(questions) >= n_queries:
                return questions, dropped
            values = candidates(table, row, attribute, k, rng)
            if values is None:
                dropped += 1
                continue
            questions.append(
                _question(table, model, row, attribute, hidden, values, p, source, rng)
            )
    return questions, dropped


@register(TEST)
def run_completion_choice(ctx: TestContext) -> TestResult:
    """Hide high-entropy attributes of random records; ask for each among five candidates."""
    p = ctx.params
    table = ValueTable.from_dataset(ctx.dataset)
    n_options = int(p.get("n_options", 5))
    n_hidden = hidden_count(len(table.names), float(p.get("mask_fraction", 0.2)))
    pool = attribute_pool(table.columns, n_hidden, n_options, float(p.get("pool_fraction", 0.5)))
    info: dict[str, Any] = {"attribute_pool": [table.names[j] for j in pool]}
    if not pool or len(table.rows) < n_options:
        return TestResult.not_applicable(
            TEST, f"no attribute has {n_options} distinct values over {n_options} rows", info=info
        )
    rng = random.Random(f"{TEST}:{ctx.seed}")
    questions, dropped = completion_questions(table, p, pool, source_phrase(ctx.dataset, p), rng)
    if not questions:
        return TestResult.not_applicable(
            TEST, "no record gave five distinct candidate values", info=info
        )
    metrics = {"hidden_per_record": n_hidden, "candidate_draws_dropped": dropped}
    return ask_and_score(ctx, TEST, questions, metrics, info)
