"""Data-only baselines: how often an answer right without memory would be right by chance.

Every baseline here is computed from the file alone, never from a model's answers.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tabmem.data import Dataset
from tabmem.stats.uniqueness import text_columns


@dataclass(frozen=True)
class MarginalMatch:
    """Chance of guessing a feature's value from its distribution alone.

    ``draw_rate``: a value drawn at random from the feature's marginal distribution equals a
    random row's value (the sum of squared value frequencies). ``mode_rate``: always
    answering the most frequent value is right (its frequency). ``rate`` is the better one.
    """

    draw_rate: float
    mode_rate: float

    @property
    def rate(self) -> float:
        return max(self.draw_rate, self.mode_rate)


def marginal_match(values: Sequence[str]) -> MarginalMatch:
    """The two chance rates of a feature whose values, one per row, are ``values``."""
    counts = Counter(values)
    n = len(values)
    if n == 0:
        return MarginalMatch(0.0, 0.0)
    return MarginalMatch(
        draw_rate=sum((c / n) ** 2 for c in counts.values()),
        mode_rate=max(counts.values()) / n,
    )


@dataclass(frozen=True)
class ExactRowBaseline:
    """Chance of writing the next row exactly without memory, by three data-only guesses.

    ``mode_row``: always write the file's most frequent row. ``repeat_previous``: repeat the
    row before (right where a file holds runs of equal rows). ``marginal_product``: write
    each field as an independent draw from its column (averaged over rows). ``rate`` is the
    best of the three.
    """

    mode_row: float
    repeat_previous: float
    marginal_product: float

    @property
    def rate(self) -> float:
        return max(self.mode_row, self.repeat_previous, self.marginal_product)


def exact_row_baseline(
    rows: Sequence[str], columns: Sequence[Sequence[str]], sample: int = 5000, seed: int = 0
) -> ExactRowBaseline:
    """The three guesses' rates; ``columns`` holds each feature's values, one per row.

    The marginal product is averaged over at most ``sample`` rows drawn by ``seed``.
    """
    n = len(rows)
    if n == 0:
        return ExactRowBaseline(0.0, 0.0, 0.0)
    mode_row = max(Counter(rows).values()) / n
    repeats = sum(a == b for a, b in itertools.pairwise(rows))
    repeat_previous = repeats / (n - 1) if n > 1 else 0.0
    frequencies = [{v: c / n for v, c in Counter(col).items()} for col in columns]
    picked = random.Random(seed).sample(range(n), min(sample, n))
    products = [
        math.prod(freq[col[i]] for freq, col in zip(frequencies, columns, strict=True))
        for i in picked
    ]
    return ExactRowBaseline(mode_row, repeat_previous, sum(products) / len(products))


def file_row_baseline(dataset: Dataset, seed: int) -> ExactRowBaseline:
    """The three guesses' rates on a file's data rows: the baseline of every test whose hit
    is a whole row written back (row completion, the header test). Its ``mode_row`` is at
    least one row's own share, 1 / rows, so the rate is never 0 on a file with rows."""
    return exact_row_baseline(dataset.rows, list(text_columns(dataset).values()), seed=seed)
