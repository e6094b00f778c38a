"""Do the samples reproduce the data's Pearson correlations between numeric features?

``recovery`` is the slope, through the origin, of the samples' correlations on the data's, over
the pairs of numeric features: 1 when the samples show the data's correlations, 0 when their
features vary independently. The permutation p-value tests the null hypothesis that the model
draws each feature independently of the others (knowing at most the marginal distributions):
shuffling each sampled column on its own keeps every marginal and breaks every dependence, and
the p-value is the share of shuffles whose recovery reaches the observed one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pandas as pd


def numeric_columns(frame: pd.DataFrame) -> list[str]:
    """Numeric columns of the data that vary (a constant column has no correlation)."""
    return [
        c
        for c in frame.columns
        if pd.api.types.is_numeric_dtype(frame[c])
        and not pd.api.types.is_bool_dtype(frame[c])
        and frame[c].nunique(dropna=True) > 1
    ]


def pairs_of(matrix: pd.DataFrame) -> np.ndarray:
    """The upper triangle of a correlation matrix (row-major), undefined entries as 0."""
    upper = np.triu_indices(matrix.shape[0], k=1)
    return np.nan_to_num(matrix.to_numpy(dtype=float)[upper], nan=0.0)


def recovery(data_pairs: np.ndarray, sample_pairs: np.ndarray) -> float:
    """Slope through the origin of sample correlations on data correlations."""
    scale = float(np.dot(data_pairs, data_pairs))
    return float(np.dot(data_pairs, sample_pairs) / scale) if scale > 0 else 0.0


@dataclass(frozen=True)
class CorrelationComparison:
    """The data's and the samples' correlation matrices and how they compare."""

    data: pd.DataFrame
    samples: pd.DataFrame
    recovery: float
    matrix_correlation: float | None
    sign_agreement: float | None
    n_strong_pairs: int
    p_value: float
    n_samples: int


def _shuffled_recovery(
    values: np.ndarray, data_pairs: np.ndarray, generator: np.random.Generator
) -> float:
    shuffled = np.column_stack([generator.permutation(col) for col in values.T])
    matrix = pd.DataFrame(shuffled).corr()
    return recovery(data_pairs, pairs_of(matrix))


def compare_correlations(
    data: pd.DataFrame,
    samples: pd.DataFrame,
    rng: random.Random,
    permutations: int = 999,
    strong: float = 0.2,
) -> CorrelationComparison:
    """Compare the two frames' correlations over ``data``'s columns (samples as floats).

    ``sign_agreement`` counts only pairs whose data correlation is at least ``strong`` in
    absolute value: the sign of a near-zero correlation is noise.
    """
    columns = list(data.columns)
    data_matrix = data.corr()
    sample_frame = samples[columns].astype(float)
    sample_matrix = sample_frame.corr()
    data_pairs, sample_pairs = pairs_of(data_matrix), pairs_of(sample_matrix)
    observed = recovery(data_pairs, sample_pairs)
    generator = np.random.default_rng(rng.randrange(2**32))
    values = sample_frame.to_numpy(dtype=float)
    reached = sum(
        _shuffled_recovery(values, data_pairs, generator) >= observed - 1e-12
        for _ in range(permutations)
    )
    strong_pairs = np.abs(data_pairs) >= strong
    agreement = (
        float(np.mean(np.sign(sample_pairs[strong_pairs]) == np.sign(data_pairs[strong_pairs])))
        if strong_pairs.any()
        else None
    )
    matrix_r = None
    if len(data_pairs) >= 3 and np.std(data_pairs) > 0 and np.std(sample_pairs) > 0:
        matrix_r = float(np.corrcoef(data_pairs, sample_pairs)[0, 1])
    return CorrelationComparison(
        data=data_matrix,
        samples=sample_matrix,
        recovery=observed,
        matrix_correlation=matrix_r,
        sign_agreement=agreement,
        n_strong_pairs=int(strong_pairs.sum()),
        p_value=(1 + reached) / (1 + permutations),
        n_samples=len(sample_frame),
    )
