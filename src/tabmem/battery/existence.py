"""Existence probe (Silvestri et al. 2025): which of five versions of a record is the real one?

For a random record, ``change_fraction`` of its attributes (one at least), drawn among the
highest-entropy attributes, take other values in four copies: each copy takes them from one
donor row of the file, so values keep their range and format and the five versions differ on
exactly those attributes, all five values of each distinct (no version is the odd one out or
the consensus). The model sees the five in random order and answers with a letter. Accuracy
is compared with the better of chance (one in five) and the data-only rule's expected accuracy
on the questions asked, one-sided binomial (``tabmem.stats.probes``).
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
from tabmem.prompts.probe_records import ValueTable, altered_copies, hidden_attributes
from tabmem.stats.best_of import ValuePredictors, predictors_for
from tabmem.stats.probes import log_frequency


@dataclass(frozen=True)
class ExistenceSettings(ChoiceSettings):
    """``conf/test/existence.yaml``."""

    change_fraction: float


TEST = "existence"


def _question(
    table: ValueTable,
    predictors: ValuePredictors,
    row: int,
    changed: list[int],
    copies: list[tuple[str, ...]],
    p: ExistenceSettings,
    source: str,
    rng: random.Random,
) -> ChoiceQuestion:
    versions = [table.rows[row], *copies]
    options = [Option(table.text(v)) for v in versions]
    scores = [sum(log_frequency(table.counts[j], v[j]) for j in changed) for v in versions]
    every = list(range(len(table.names)))
    records = [dict(enumerate(v)) for v in versions]
    rules = predictors.choice_scores(records, [every] * len(versions), row)
    shuffled = shuffle_options(options, scores, rng)
    text = p.question.format(source=source, options=option_block(shuffled.options))
    extra = {"row": row + 1, "changed": [table.names[j] for j in changed]}
    return shuffled.question(text, rules, extra)


def existence_questions(
    table: ValueTable,
    p: ExistenceSettings,
    pool: list[int],
    n_changed: int,
    source: str,
    rng: random.Random,
) -> tuple[list[ChoiceQuestion], int]:
    """Up to ``n_queries`` questions on records drawn without replacement, and how many draws
    were dropped (values not all distinct, or a copy that is a row of the file)."""
    n_queries, k = p.n_queries, p.n_options - 1
    predictors = predictors_for(table.rows)
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
        questions.append(_question(table, predictors, row, changed, copies, p, source, rng))
    return questions, dropped


@register_lifecycle
class Existence(ChoiceProbe):
    """Show a real record among four altered copies; ask which one is in the dataset."""

    name = TEST
    table_order = 7
    claims = "rows_seen"
    title = "existence"
    settings = ExistenceSettings
    none_drawn = "no record gave four distinct altered copies"
    fraction_key = "change_fraction"
    figure_names = ("changed_per_record", "record_draws_dropped")
    draw = staticmethod(existence_questions)
