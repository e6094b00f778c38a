"""First token baselines: predict the next row's first token from the rows before it.

Three predictors are fitted on the file alone: (a) the most frequent first token,
(b) a logistic regression and (c) gradient-boosted trees (xgboost). (b) and (c) see the
first tokens of the ``context_rows`` previous rows and every field of the previous row.
They predict one of the ``classes`` most frequent tokens (they learn from the positions
whose token is one of those; a rarer token is always missed), are trained on a random
share of at most ``max_rows`` positions and scored on the rest (the holdout). The baseline
is the best holdout accuracy of the three: what a model that knows how rows follow each
other in general, but not this file's rows, could reach.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class PredictorResult:
    """One predictor's holdout accuracy and its predictions for the queried positions."""

    name: str
    accuracy: float
    predictions: list[str] = field(default_factory=list)


@dataclass
class FirstTokenBaseline:
    """All predictors' results, the best one first among equals, and the data they used."""

    predictors: list[PredictorResult]
    train_positions: int
    holdout_positions: int

    @property
    def best(self) -> PredictorResult:
        return max(self.predictors, key=lambda p: p.accuracy)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [{"predictor": p.name, "holdout_accuracy": p.accuracy} for p in self.predictors]
        )


def features(
    positions: Sequence[int], tokens: Callable[[int], str], frame: pd.DataFrame, context_rows: int
) -> pd.DataFrame:
    """One row per position: the previous rows' first tokens and the previous row's fields."""
    previous = frame.iloc[[p - 1 for p in positions]].reset_index(drop=True)
    previous.columns = [f"prev_{c}" for c in previous.columns]
    for back in range(1, context_rows + 1):
        previous[f"token_{back}"] = [tokens(p - back) for p in positions]
    return previous


def _split_kinds(x: pd.DataFrame) -> tuple[list[str], list[str]]:
    numeric = [c for c in x.columns if pd.api.types.is_numeric_dtype(x[c])]
    return numeric, [c for c in x.columns if c not in numeric]


def _logistic(x_train: pd.DataFrame, y_train: np.ndarray, seed: int):
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric, categorical = _split_kinds(x_train)
    encode = ColumnTransformer(
        [
            ("num", make_pipeline(SimpleImputer(), StandardScaler()), numeric),
            ("cat", OneHotEncoder(handle_unknown="ignore", max_categories=20), categorical),
        ]
    )
    model = make_pipeline(encode, LogisticRegression(max_iter=300, random_state=seed))
    return model.fit(x_train.astype({c: str for c in categorical}), y_train)


def _boosted(x_train: pd.DataFrame, y_train: np.ndarray, seed: int):
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OrdinalEncoder
    from xgboost import XGBClassifier

    numeric, categorical = _split_kinds(x_train)
    encode = ColumnTransformer(
        [
            ("num", "passthrough", numeric),
            (
                "cat",
                OrdinalEncoder(
                    handle_unknown="use_encoded_value", unknown_value=np.nan, dtype=float
                ),
                categorical,
            ),
        ]
    )
    trees = XGBClassifier(
        n_estimators=25, max_depth=4, learning_rate=0.3, n_jobs=1, random_state=seed
    )
    return make_pipeline(encode, trees).fit(x_train.astype({c: str for c in categorical}), y_train)


def _fit_predict(kind: str, x_train, y_train, x_test_sets, seed: int) -> list[np.ndarray]:
    """Labels predicted for each test set; a single training class predicts itself."""
    if len(set(y_train.tolist())) == 1:
        return [np.full(len(x), y_train[0]) for x in x_test_sets]
    model = (_logistic if kind == "logistic_regression" else _boosted)(x_train, y_train, seed)
    _, categorical = _split_kinds(x_train)
    return [
        model.predict(x.astype({c: str for c in categorical})) if len(x) else np.array([], int)
        for x in x_test_sets
    ]


def first_token_baseline(
    tokens: Callable[[int], str],
    frame: pd.DataFrame,
    queried: Sequence[int],
    context_rows: int = 3,
    max_rows: int = 2000,
    classes: int = 20,
    holdout_fraction: float = 0.25,
    seed: int = 0,
) -> FirstTokenBaseline:
    """Fit the three predictors on positions other than ``queried`` and score the holdout.

    ``tokens(i)`` is the first token of data row ``i`` (0-based); positions start at
    ``context_rows`` so every one has its previous rows. Each result also holds the
    predictions for the ``queried`` positions, for a paired test against the model.
    """
    rng = random.Random(seed)
    excluded = set(queried)
    pool = [i for i in range(context_rows, len(frame)) if i not in excluded]
    positions = rng.sample(pool, min(max_rows, len(pool)))
    cut = max(1, round(len(positions) * (1 - holdout_fraction)))
    train, holdout = positions[:cut], positions[cut:]
    y_train_tokens = [tokens(i) for i in train]
    holdout_tokens = [tokens(i) for i in holdout]
    vocabulary = [t for t, _ in Counter(y_train_tokens).most_common(classes)]
    label = {t: k for k, t in enumerate(vocabulary)}
    learnable = [i for i, t in zip(train, y_train_tokens, strict=True) if t in label]
    y_train = np.array([label[tokens(i)] for i in learnable])

    def decode(labels: np.ndarray) -> list[str]:
        return [vocabulary[k] for k in labels.tolist()]

    def accuracy(predicted: list[str]) -> float:
        hits = sum(p == t for p, t in zip(predicted, holdout_tokens, strict=True))
        return hits / len(holdout_tokens) if holdout_tokens else 0.0

    mode = vocabulary[0]
    results = [PredictorResult("mode", accuracy([mode] * len(holdout)), [mode] * len(queried))]
    x_train = features(learnable, tokens, frame, context_rows)
    x_sets = [features(s, tokens, frame, context_rows) for s in (holdout, list(queried))]
    for kind in ("logistic_regression", "gradient_boosted_trees"):
        on_holdout, on_queried = _fit_predict(kind, x_train, y_train, x_sets, seed)
        results.append(PredictorResult(kind, accuracy(decode(on_holdout)), decode(on_queried)))
    return FirstTokenBaseline(results, len(train), len(holdout))
