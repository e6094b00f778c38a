"""Completion probe (Silvestri et al. 2025): pick a hidden value of a record among five.

For a random record, ``mask_fraction`` of its attributes (one at least) are hidden; they are
drawn among the highest-entropy attributes (``tabmem.stats.probes.attribute_pool``). For each
hidden attribute the model sees the record and five candidate values, the true one and four
taken from donor rows (``tabmem.prompts.probe_records``), in random order, and answers with a
letter. Accuracy is compared with the better of chance (one in five) and the data-only rule's
expected accuracy on the questions asked, one-sided binomial (``tabmem.stats.probes``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tabmem.battery.choice_probe import (
    ChoiceProbe,
    ChoiceQuestion,
    ChoiceSettings,
    shuffle_options,
)
from tabmem.battery.lifecycle import register_lifecycle
from tabmem.prompts.choices import Option, option_block
from tabmem.prompts.probe_records import ValueTable, candidates, hidden_attributes
from tabmem.stats.best_of import ValuePredictors, predictors_for
from tabmem.stats.probes import log_frequency


@dataclass(frozen=True)
class CompletionChoiceSettings(ChoiceSettings):
    """``conf/test/completion_choice.yaml``."""

    mask_fraction: float
    mask_token: str


TEST = "completion_choice"


def _question(
    table: ValueTable,
    predictors: ValuePredictors,
    row: int,
    attribute: int,
    hidden: list[int],
    values: list[str],
    p: CompletionChoiceSettings,
    source: str,
    rng: random.Random,
) -> ChoiceQuestion:
    name, mask = table.names[attribute], p.mask_token
    options = [Option(f"{name} = {v}", v) for v in values]
    scores = [log_frequency(table.counts[attribute], v) for v in values]
    shown = {j: v for j, v in enumerate(table.rows[row]) if j not in hidden}
    records = [{**shown, attribute: v} for v in values]
    rules = predictors.choice_scores(records, [[attribute]] * len(values), row)
    shuffled = shuffle_options(options, scores, rng)
    text = p.question.format(
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
    return shuffled.question(text, rules, extra)


def completion_questions(
    table: ValueTable,
    p: CompletionChoiceSettings,
    pool: list[int],
    n_hidden: int,
    source: str,
    rng: random.Random,
) -> tuple[list[ChoiceQuestion], int]:
    """Up to ``n_queries`` questions over records drawn without replacement, and how many
    candidate draws were dropped (five values not all distinct and non-empty)."""
    predictors = predictors_for(table.rows)
    n_queries, k = p.n_queries, p.n_options - 1
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
                _question(table, predictors, row, attribute, hidden, values, p, source, rng)
            )
    return questions, dropped


@register_lifecycle
class CompletionChoice(ChoiceProbe):
    """Hide high-entropy attributes of random records; ask for each among five candidates."""

    name = TEST
    table_order = 6
    claims = "rows_seen"
    title = "completion choice"
    settings = CompletionChoiceSettings
    none_drawn = "no record gave five distinct candidate values"
    fraction_key = "mask_fraction"
    figure_names = ("hidden_per_record", "candidate_draws_dropped")
    draw = staticmethod(completion_questions)
