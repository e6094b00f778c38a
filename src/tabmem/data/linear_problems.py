"""Synthetic binary problems for in-context statistical learning (second paper, Figure 3).

A problem draws a direction z ~ N(0, I_d) and points x ~ N(0, I_d), written with ``decimals``
decimals; the label is y = 1[x·z >= 0], computed from the written values, so every learner
sees data that the rule fits exactly. Nothing about such a problem can have been memorized.

As in the paper, the examples are a stratified sample: half of them of each label (the odd
one, if any, to a label chosen at random), while the point to label is an unconditional draw.
The paper drew them from a large file of such points with labels split about evenly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LinearProblem:
    """``shots`` labelled points and one test point of one random half-space problem."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: int

    @property
    def dimension(self) -> int:
        return int(self.train_x.shape[1])


def linear_problem(
    dimension: int, shots: int, rng: np.random.Generator, decimals: int = 2
) -> LinearProblem:
    """One problem: ``shots`` training points, half of each label, in random order, and a test
    point; all labelled by a random half-space."""
    direction = rng.standard_normal(dimension)
    test_x = np.round(rng.standard_normal(dimension), decimals)
    ones = shots // 2 + (shots % 2) * int(rng.integers(2))
    wanted = {0: shots - ones, 1: ones}
    kept: dict[int, list[np.ndarray]] = {0: [], 1: []}
    while any(len(kept[label]) < wanted[label] for label in kept):
        for point in np.round(rng.standard_normal((2 * shots + 2, dimension)), decimals):
            label = int(point @ direction >= 0)
            if len(kept[label]) < wanted[label]:
                kept[label].append(point)
    points = np.array(kept[0] + kept[1]).reshape(shots, dimension)
    labels = np.array([0] * wanted[0] + [1] * wanted[1], dtype=int)
    order = rng.permutation(shots)
    return LinearProblem(points[order], labels[order], test_x, int(test_x @ direction >= 0))
