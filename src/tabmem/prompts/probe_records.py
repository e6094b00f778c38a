"""The records the probes show: a file's rows as values, and the candidates beside a true value.

Candidates come from *donor rows*: the values the same attributes have in other rows of the
file, drawn uniformly. The true record is itself a uniformly drawn row, so the true value and
the four others are drawn alike; a draw is kept only when the five values of every asked
attribute are distinct and non-empty (a condition that treats all five alike), so the true
option is exchangeable with the others for anyone who knows only the distribution of each
attribute, or of the asked attributes jointly. Only the link between the asked attributes and
the rest of the record tells them apart.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from tabmem.data import Dataset
from tabmem.data.table import RawTable
from tabmem.prompts.observations import format_observation


@dataclass(frozen=True)
class ValueTable:
    """A dataset's feature names and rows as values: fields unquoted and stripped."""

    names: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @classmethod
    def from_dataset(cls, dataset: Dataset) -> ValueTable:
        raw = RawTable.from_dataset(dataset)
        rows = tuple(
            tuple(v.strip() for v in row) for row in raw.rows if len(row) == len(raw.header)
        )
        return cls(tuple(n.strip() for n in raw.header), rows)

    @cached_property
    def columns(self) -> list[list[str]]:
        return [[row[j] for row in self.rows] for j in range(len(self.names))]

    @cached_property
    def counts(self) -> list[Counter[str]]:
        """Each column's values and how many rows hold each."""
        return [Counter(column) for column in self.columns]

    @cached_property
    def row_set(self) -> frozenset[tuple[str, ...]]:
        return frozenset(self.rows)

    def text(self, values: Sequence[str], hidden: Sequence[int] = (), mask: str = "?") -> str:
        """A record as ``name = value`` pairs, the attributes ``hidden`` shown as ``mask``."""
        shown = [mask if j in hidden else v for j, v in enumerate(values)]
        return format_observation(self.names, shown)


def donors(table: ValueTable, row: int, k: int, rng: random.Random) -> list[tuple[str, ...]]:
    """``k`` other rows of the table, drawn uniformly without replacement."""
    others = rng.sample(range(len(table.rows) - 1), k)
    return [table.rows[i if i < row else i + 1] for i in others]


def distinct_values(values: Sequence[str]) -> bool:
    """Whether the values are non-empty and pairwise different."""
    return all(values) and len(set(values)) == len(values)


def hidden_attributes(
    values: Sequence[str], pool: Sequence[int], k: int, rng: random.Random
) -> list[int]:
    """Up to ``k`` attributes of ``pool`` with a non-empty value in this record, in file order."""
    present = [j for j in pool if values[j]]
    return sorted(rng.sample(present, min(k, len(present))))


def candidates(
    table: ValueTable, row: int, attribute: int, k: int, rng: random.Random
) -> list[str] | None:
    """The true value of ``attribute`` in ``row`` and ``k`` donor rows' values for it; None when
    the ``k + 1`` values are not all distinct and non-empty (the draw is dropped, not redrawn)."""
    values = [table.rows[row][attribute], *(d[attribute] for d in donors(table, row, k, rng))]
    return values if distinct_values(values) else None


def altered_copies(
    table: ValueTable, row: int, attributes: Sequence[int], k: int, rng: random.Random
) -> list[tuple[str, ...]] | None:
    """``k`` copies of ``row``, each with ``attributes`` taken from one donor row; None when
    the values of an attribute are not all distinct over the record and its copies, or a copy
    is a row of the table (the draw is dropped, not redrawn)."""
    genuine = table.rows[row]
    copies = []
    for donor in donors(table, row, k, rng):
        copy = list(genuine)
        for j in attributes:
            copy[j] = donor[j]
        copies.append(tuple(copy))
    for j in attributes:
        if not distinct_values([genuine[j], *(c[j] for c in copies)]):
            return None
    return None if any(c in table.row_set for c in copies) else copies
