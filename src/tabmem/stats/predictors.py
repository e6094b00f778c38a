"""First token baselines: predict a row's first token from the rows before it, cross-fitted.

Three predictors are fitted on the file alone: (a) the most frequent first token,
(b) a logistic regression and (c) gradient-boosted trees (xgboost). (b) and (c) see the
first tokens of the ``context_rows`` previous rows and every field of the previous row.
They predict one of the ``classes`` most frequent tokens (they learn from the positions
whose token is one of those; a rarer token is always missed).

Every scored position (all of them, at most ``max_rows`` with the queried ones always among
them) is predicted by models fitted on the other folds of a seeded K-fold split, so no row's
first token is ever predicted by a model that learnt it, and the accuracy is measured on all
scored positions rather than on the few left over once the queried rows are set aside (136
of iris' 150 rows queried used to leave 3 rows to score, and a baseline of 1/3 or 2/3). The
best predictor is the one with the highest cross-fitted accuracy over all scored positions.
The test's baseline is per query (``tabmem.stats.best_of``): the best of each predictor's
cross-fitted answer on that position (right or not), a draw from the other positions' first
tokens (``FirstTokenBaseline.chances``), averaged over the queries, with the better of the best
predictor's accuracy over all scored positions and the marginal rate as a floor (``rate``). A
held-out row still shows among the *features* of the position after it (as its previous row):
that can only help the baseline, so it errs towards ``no_evidence``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from tabmem.stats.baselines import marginal_match
from tabmem.stats.best_of import DRAW


@dataclass
class PredictorResult:
    """One predictor's cross-fitted predictions (position -> token) and their accuracy."""

    name: str
    accuracy: float
    predictions: dict[int, str]


@dataclass
class FirstTokenBaseline:
    """All predictors' results, the best one first among equals, and the data they used.

    ``chance`` is the marginal rate of the first tokens (the better of a random draw and the
    most frequent token).
    """

    predictors: list[PredictorResult]
    positions: list[int]
    folds: int
    chance: float
    truth: dict[int, str]

    @property
    def best(self) -> PredictorResult:
        return max(self.predictors, key=lambda p: p.accuracy)

    @property
    def rate(self) -> float:
        """What a model without the rows reaches at its best: the best predictor's
        cross-fitted accuracy, or the marginal rate where that is higher."""
        return max(self.chance, self.best.accuracy)

    def right(self, position: int) -> bool:
        """Whether the best predictor, fitted without ``position``, gets its token right."""
        return self.best.predictions[position] == self.truth[position]

    def chances(self, position: int) -> dict[str, float]:
        """Each data-only predictor's chance on ``position``, none fitted on it: the three
        predictors' answers (1 when right) and a draw from the other positions' first
        tokens."""
        truth = self.truth[position]
        out = {p.name: float(p.predictions[position] == truth) for p in self.predictors}
        others = self._counts[truth] - 1
        out[DRAW] = others / (len(self.positions) - 1) if len(self.positions) > 1 else 0.0
        return out

    @cached_property
    def _counts(self) -> Counter[str]:
        return Counter(self.truth.values())

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [{"predictor": p.name, "cross_fitted_accuracy": p.accuracy} for p in self.predictors]
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


KINDS = ("mode", "logistic_regression", "gradient_boosted_trees")


def _fold_predictions(
    y_tokens: list[str], x_train: pd.DataFrame, x_test: pd.DataFrame, classes: int, seed: int
) -> dict[str, list[str]]:
    """Each predictor's tokens for ``x_test``, from a vocabulary, a most frequent token and
    models fitted on the training rows (``x_train``, first tokens ``y_tokens``) alone."""
    vocabulary = [t for t, _ in Counter(y_tokens).most_common(classes)]
    label = {t: n for n, t in enumerate(vocabulary)}
    learnable = [j for j, t in enumerate(y_tokens) if t in label]
    y_train = np.array([label[y_tokens[j]] for j in learnable])
    x_learn = x_train.iloc[learnable].reset_index(drop=True)
    guesses = {"mode": [vocabulary[0]] * len(x_test)}
    for kind in KINDS[1:]:
        (labels,) = _fit_predict(kind, x_learn, y_train, [x_test], seed)
        guesses[kind] = [vocabulary[n] for n in labels.tolist()]
    return guesses


def scored_positions(
    n_rows: int, queried: Sequence[int], context_rows: int, max_rows: int, seed: int
) -> list[int]:
    """The positions the baseline predicts: every queried one that has its previous rows, and
    a seeded sample of the others up to ``max_rows`` in all."""
    first = [q for q in dict.fromkeys(queried) if context_rows <= q < n_rows]
    taken = set(first)
    others = [i for i in range(context_rows, n_rows) if i not in taken]
    extra = random.Random(seed).sample(others, min(max(0, max_rows - len(first)), len(others)))
    return sorted(first + extra)


def first_token_baseline(
    tokens: Callable[[int], str],
    frame: pd.DataFrame,
    queried: Sequence[int],
    context_rows: int = 3,
    max_rows: int = 2000,
    classes: int = 20,
    folds: int = 5,
    seed: int = 0,
) -> FirstTokenBaseline:
    """Cross-fit the three predictors over the scored positions (``queried`` among them).

    ``tokens(i)`` is the first token of data row ``i`` (0-based); positions start at
    ``context_rows`` so every one has its previous rows. Each fold's vocabulary, most
    frequent token and models come from the other folds only.
    """
    positions = scored_positions(len(frame), queried, context_rows, max_rows, seed)
    if len(positions) < 2:
        raise ValueError("a cross-fitted baseline needs at least two positions to score")
    truth = {i: tokens(i) for i in positions}
    order = positions.copy()
    random.Random(seed + 1).shuffle(order)
    k = max(2, min(folds, len(order)))
    fold_of = {position: j % k for j, position in enumerate(order)}
    x_all = features(positions, tokens, frame, context_rows)
    row_of = {position: j for j, position in enumerate(positions)}
    predicted: dict[str, dict[int, str]] = {kind: {} for kind in KINDS}
    for fold in range(k):
        test = [i for i in positions if fold_of[i] == fold]
        train = [i for i in positions if fold_of[i] != fold]
        x_train, x_test = (x_all.iloc[[row_of[i] for i in part]] for part in (train, test))
        guesses = _fold_predictions(
            [truth[i] for i in train], x_train, x_test.reset_index(drop=True), classes, seed
        )
        for kind, tokens_of_fold in guesses.items():
            predicted[kind].update(zip(test, tokens_of_fold, strict=True))
    results = [
        PredictorResult(
            kind,
            sum(predicted[kind][i] == truth[i] for i in positions) / len(positions),
            predicted[kind],
        )
        for kind in KINDS
    ]
    chance = marginal_match(list(truth.values())).rate
    return FirstTokenBaseline(results, positions, k, chance, truth)
