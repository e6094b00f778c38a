"""Synthetic binary problems for in-context statistical learning (second paper, Figure 3).

A problem draws a direction z ~ N(0, I_d) and points x ~ N(0, I_d), written with ``decimals``
decimals; the label is y = 1[x·z >= 0], computed from the written values, so every learner
sees data that the rule fits exactly. Nothing about such a problem can have been memorized.
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
    """One problem: ``shots`` training points and a test point, labelled by a random half-space."""
    direction = rng.standard_normal(dimension)
    points = np.round(rng.standard_normal((shots + 1, dimension)), decimals)
    labels = (points @ direction >= 0).astype(int)
    return LinearProblem(points[:shots], labels[:shots], points[shots], int(labels[shots]))
