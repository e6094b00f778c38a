"""Which rows are tested and which rows each test row may learn from, seeded.

Test rows are a seeded sample of the rows. They are cut into blocks of at most
``max_test_fraction`` of the data; every row of a block learns only from rows outside the
block (the few-shot examples of a language model, the whole training set of a baseline), so
no test row ever sees itself or another row of its block. On a large dataset that is one
block: a plain train / test split. On a small one (iris) it is a cross-fitting in a few folds,
which lets every row be tested.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Block:
    """Test rows and the rows they may learn from (indices into the labelled rows)."""

    test: tuple[int, ...]
    train: tuple[int, ...]


def holdout_blocks(n_rows: int, n_test: int, max_test_fraction: float, seed: int) -> list[Block]:
    """``min(n_test, n_rows - 1)`` seeded test rows in blocks of at most ``max_test_fraction``
    of the rows (one row at least), each with every row outside it as its training rows."""
    if n_rows < 2:
        return []
    rng = np.random.default_rng([seed, n_rows])
    chosen = [int(i) for i in rng.permutation(n_rows)[: max(1, min(n_test, n_rows - 1))]]
    size = max(1, min(len(chosen), int(max_test_fraction * n_rows)))
    blocks = []
    for start in range(0, len(chosen), size):
        test = chosen[start : start + size]
        held = set(test)
        blocks.append(Block(tuple(test), tuple(i for i in range(n_rows) if i not in held)))
    return blocks


def allocate(counts: Counter[str], k: int) -> dict[str, int]:
    """``k`` draws shared among classes in proportion to ``counts`` (largest remainders, ties
    to the larger class, then the label's order), never more than a class has."""
    total = sum(counts.values())
    k = min(k, total)
    exact = {label: k * n / total for label, n in counts.items()}
    shares = {label: int(value) for label, value in exact.items()}
    order = sorted(counts, key=lambda c: (-(exact[c] - shares[c]), -counts[c], c))
    left = k - sum(shares.values())
    for label in order:
        if left == 0:
            break
        if shares[label] < counts[label]:
            shares[label] += 1
            left -= 1
    return shares


def stratified_sample(
    labels: Sequence[str], pool: Sequence[int], k: int, rng: np.random.Generator
) -> list[int]:
    """``k`` rows of ``pool`` whose labels follow the pool's label frequencies, shuffled."""
    by_label: dict[str, list[int]] = {}
    for i in pool:
        by_label.setdefault(labels[i], []).append(i)
    shares = allocate(Counter({label: len(rows) for label, rows in by_label.items()}), k)
    chosen: list[int] = []
    for label in sorted(shares):
        rows = by_label[label]
        picked = rng.choice(len(rows), size=shares[label], replace=False)
        chosen.extend(rows[int(p)] for p in picked)
    return [chosen[int(p)] for p in rng.permutation(len(chosen))]
