"""What anyone reads in a column of near-unique words: a title in a passenger's name.

A column whose values are nearly all distinct names its rows, and a model of the table learns
nothing from the whole value. One of its words may still be shared by many rows and tell other
columns (a title tells the passenger's sex). A value's *sign* is its word that the most rows of
the column hold, where at least ``SIGN_SHARE`` of them (and ``SIGN_ROWS``) do. The twin draws a
column the sign tells among the rows of the same sign (``tabmem.data.synthesis``), so that a
model that reads titles finds no twin row odd.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tabmem.data.values import normalize_value

SIGN_SHARE = 0.01
SIGN_ROWS = 5
"""A word is a sign where at least this share of the column's rows, and this many, hold it."""


@dataclass(frozen=True)
class WordSigns:
    """A column's signs: the words its values are read by, and how many rows hold each."""

    holders: dict[str, int]

    @classmethod
    def of(cls, values: Sequence[str]) -> WordSigns:
        counts = Counter(w for v in values for w in set(normalize_value(v).split()))
        floor = max(SIGN_ROWS, SIGN_SHARE * len(values))
        return cls({w: n for w, n in counts.items() if n >= floor})

    def sign(self, value: str) -> str:
        """The value's word that the most rows hold (ties: the later word in sort order), or ""
        where it holds no sign."""
        words = [w for w in set(normalize_value(value).split()) if w in self.holders]
        return max(words, key=lambda w: (self.holders[w], w), default="")
