"""Statistical classifiers, the baselines a language model is compared with.

- ``logistic_regression``: standardised features, L2 penalty, its constant ``C`` chosen by
  stratified cross-validation (accuracy) from ``Cs``.
- ``gradient_boosted_tree``: xgboost with ``max_depth``, the L1 constant ``reg_alpha`` and the
  L2 constant ``reg_lambda`` chosen by a seeded random search with stratified
  cross-validation; the search runs on at most ``cv_rows`` training rows, the chosen model is
  then fitted on all of them.
- ``majority_class``: always the most frequent training label.
- ``random_search_logistic``: the second paper's reference learner for in-context statistical
  learning (Figure 3): standardised features, L2 penalty, ``C`` the best of a few seeded
  uniform draws by stratified cross-validated accuracy.

Features follow the column kinds: numeric columns with missing values imputed by the median
(and a missing-value indicator), categorical columns one-hot encoded (unseen categories
ignored), identifiers left out. Labels are strings throughout.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.dummy import DummyClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.model_selection import RandomizedSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import LabelEncoder, OneHotEncoder, StandardScaler
from threadpoolctl import threadpool_limits

ESTIMATORS = ("logistic_regression", "gradient_boosted_tree", "majority_class")
DEFAULT_CS = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)
DEFAULT_DEPTHS = (2, 3, 4, 6)
DEFAULT_PENALTIES = (1e-8, 1e-6, 1e-4, 1e-2, 1.0)


@dataclass(frozen=True)
class Fitted:
    """Predicted labels for the test rows, and what the fit chose (hyperparameters, folds)."""

    labels: list[str]
    info: dict[str, Any] = field(default_factory=dict)


def features(kinds: Mapping[str, str], scale: bool) -> ColumnTransformer:
    """The feature map: numeric imputed (and scaled), categorical one-hot, identifiers dropped."""
    numeric = [name for name, kind in kinds.items() if kind == "numeric"]
    categorical = [name for name, kind in kinds.items() if kind == "categorical"]
    numeric_steps: list[tuple[str, Any]] = [
        ("impute", SimpleImputer(strategy="median", add_indicator=True))
    ]
    if scale:
        numeric_steps.append(("scale", StandardScaler()))
    categorical_steps = [
        ("impute", SimpleImputer(strategy="constant", fill_value="(missing)")),
        ("onehot", OneHotEncoder(handle_unknown="ignore", sparse_output=False)),
    ]
    return ColumnTransformer(
        [
            ("numeric", Pipeline(numeric_steps), numeric),
            ("categorical", Pipeline(categorical_steps), categorical),
        ],
        remainder="drop",
    )


def cv_folds(labels: Sequence[str], wanted: int) -> int:
    """Stratified folds the labels allow: at most ``wanted``, at most the rarest class's count."""
    return min(wanted, min(Counter(labels).values()))


def _fit_logistic(
    train: np.ndarray, labels: np.ndarray, options: Mapping[str, Any], seed: int
) -> tuple[LogisticRegression, dict[str, Any]]:
    """Choose C by cross-validation on a subsample, then fit on every row with that C."""
    max_iter = int(options.get("max_iter", 2000))
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.permutation(len(train))[: int(options.get("cv_rows", 5000))])
    folds = cv_folds([str(v) for v in labels[sample]], int(options.get("cv_folds", 5)))
    best = 1.0
    if folds >= 2:
        search = LogisticRegressionCV(
            Cs=[float(c) for c in options.get("Cs", DEFAULT_CS)],
            cv=StratifiedKFold(folds, shuffle=True, random_state=seed),
            l1_ratios=(0.0,),
            scoring="accuracy",
            max_iter=max_iter,
            use_legacy_attributes=False,
        ).fit(train[sample], labels[sample])
        best = float(np.ravel(search.C_)[0])
    model = LogisticRegression(C=best, max_iter=max_iter).fit(train, labels)
    return model, {"C": best, "cv_folds": folds, "cv_rows": len(sample)}


def _tree_search_space(options: Mapping[str, Any]) -> dict[str, list[Any]]:
    penalties = [float(v) for v in options.get("penalties", DEFAULT_PENALTIES)]
    return {
        "max_depth": [int(d) for d in options.get("max_depths", DEFAULT_DEPTHS)],
        "reg_alpha": penalties,
        "reg_lambda": penalties,
    }


def _fit_tree(
    train: np.ndarray, codes: np.ndarray, options: Mapping[str, Any], seed: int
) -> tuple[Any, dict[str, Any]]:
    """Search the tree's hyperparameters on a subsample, then fit the best on every row.

    ``train`` is already the feature matrix: the features are fitted once on the training
    rows, not once per fold, which makes the search several times cheaper.
    """
    from xgboost import XGBClassifier

    model = XGBClassifier(
        n_estimators=int(options.get("n_estimators", 100)),
        tree_method="hist",
        n_jobs=int(options.get("n_jobs", 1)),
        random_state=seed,
    )
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.permutation(len(train))[: int(options.get("cv_rows", 5000))])
    folds = cv_folds([str(c) for c in codes[sample]], int(options.get("cv_folds", 5)))
    if folds < 2:
        return model.fit(train, codes), {"cv_folds": folds}
    search = RandomizedSearchCV(
        model,
        _tree_search_space(options),
        n_iter=int(options.get("n_iter", 10)),
        scoring="accuracy",
        cv=StratifiedKFold(folds, shuffle=True, random_state=seed),
        random_state=seed,
        refit=False,
    )
    search.fit(train[sample], codes[sample])
    model.set_params(**search.best_params_)
    return model.fit(train, codes), {
        **search.best_params_,
        "cv_folds": folds,
        "cv_rows": len(sample),
        "cv_accuracy": float(search.best_score_),
    }


def fit_predict(
    estimator: str,
    train: pd.DataFrame,
    labels: Sequence[str],
    test: pd.DataFrame,
    kinds: Mapping[str, str],
    seed: int,
    options: Mapping[str, Any] | None = None,
) -> Fitted:
    """Fit ``estimator`` on the training rows and labels; predict a label for each test row.

    Linear algebra runs on one thread: grid cells already run in parallel, and BLAS threads
    that wait for a busy core burn many times the CPU time of the fit itself.
    """
    with threadpool_limits(limits=1):
        return _fit_predict(estimator, train, labels, test, kinds, seed, options or {})


def _fit_predict(
    estimator: str,
    train: pd.DataFrame,
    labels: Sequence[str],
    test: pd.DataFrame,
    kinds: Mapping[str, str],
    seed: int,
    options: Mapping[str, Any],
) -> Fitted:
    classes = sorted(set(labels))
    if len(classes) == 1 or estimator == "majority_class":
        model = DummyClassifier(strategy="most_frequent").fit(train, list(labels))
        return Fitted([str(v) for v in model.predict(test)], {"train_rows": len(train)})
    if estimator == "logistic_regression":
        design = features(kinds, scale=True).fit(train)
        model, info = _fit_logistic(design.transform(train), np.asarray(labels), options, seed)
        predicted = model.predict(design.transform(test))
        return Fitted([str(v) for v in predicted], {**info, "train_rows": len(train)})
    if estimator == "gradient_boosted_tree":
        encoder = LabelEncoder().fit(classes)
        design = features(kinds, scale=False).fit(train)
        codes = encoder.transform(list(labels))
        model, info = _fit_tree(design.transform(train), codes, options, seed)
        predicted = encoder.inverse_transform(model.predict(design.transform(test)).astype(int))
        return Fitted([str(v) for v in predicted], {**info, "train_rows": len(train)})
    raise ValueError(f"unknown estimator {estimator!r}; known: {', '.join(ESTIMATORS)}")


@dataclass(frozen=True)
class LinearRule:
    """A fitted logistic regression on standardised features: label 1 where the score >= 0."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    intercept: float
    C: float

    def predict(self, x: np.ndarray) -> np.ndarray:
        z = (np.atleast_2d(x) - self.mean) / self.scale
        return (z @ self.weights + self.intercept > 0).astype(int)


def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x scaled to mean 0 and (population) standard deviation 1; constant columns kept at 1."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return (x - mean) / scale, mean, scale


def _loss(theta: np.ndarray, design: np.ndarray, y: np.ndarray, cs: np.ndarray) -> np.ndarray:
    margins = theta @ design.T  # (k, n)
    data = np.logaddexp(0.0, margins) - y * margins
    return 0.5 * np.sum(theta[:, :-1] ** 2, axis=1) + cs * data.sum(axis=1)


def l2_logistic(x: np.ndarray, y: np.ndarray, cs: np.ndarray) -> np.ndarray:
    """Minimisers of 0.5 |w|^2 + C * sum(log-loss) (the intercept not penalised, scikit-learn's
    L2 objective) for every ``C`` in ``cs`` at once: damped Newton steps on all of them
    together. Returns one row (w, b) per ``C``. Small problems (the paper's few-shot points)
    need milliseconds where scikit-learn's per-fit overhead needs tenths of a second.
    """
    n, d = x.shape
    design = np.hstack([x, np.ones((n, 1))])
    penalty = np.eye(d + 1)
    penalty[d, d] = 0.0
    theta = np.zeros((len(cs), d + 1))
    loss = _loss(theta, design, y, cs)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(theta @ design.T)))
        gradient = theta @ penalty + cs[:, None] * ((p - y) @ design)
        curvature = np.einsum("kn,ni,nj->kij", cs[:, None] * p * (1 - p), design, design)
        step = np.linalg.solve(curvature + penalty + 1e-10 * np.eye(d + 1), gradient[..., None])
        step = step[..., 0]
        size = np.ones(len(cs))
        for _ in range(40):
            trial = theta - size[:, None] * step
            new_loss = _loss(trial, design, y, cs)
            worse = new_loss > loss + 1e-12
            if not worse.any():
                break
            size = np.where(worse, size / 2, size)
        theta, loss = trial, np.minimum(new_loss, loss)
        if np.max(np.abs(size[:, None] * step)) < 1e-9:
            break
    return theta


def random_search_logistic(
    x: np.ndarray,
    y: np.ndarray,
    folds: int,
    draws: int,
    c_range: tuple[float, float],
    rng: np.random.Generator,
) -> LinearRule:
    """Standardised L2 logistic regression whose ``C`` is the best of ``draws`` values drawn
    uniformly from ``c_range``, by mean accuracy over stratified ``folds``-fold
    cross-validation (fewer folds when a label has fewer rows; ties go to the value drawn
    first), refitted on every row. The scaler is fitted inside each fold.

    This is how the second paper fitted its logistic-regression line of Figure 3 (scikit-learn
    ``RandomizedSearchCV`` over ``C`` ~ U(0.001, 10.001) on a scaler-and-logistic pipeline,
    7 folds); a fixed ``C`` = 1 on raw features falls 0.01-0.05 below that line.
    """
    low, high = c_range
    candidates = rng.uniform(low, high, draws)
    folds = min(folds, int(np.bincount(y).min()))
    best = float(candidates[0])
    if folds >= 2 and draws > 1:
        splits = StratifiedKFold(folds, shuffle=True, random_state=int(rng.integers(2**31)))
        scores = np.zeros(draws)
        for train, test in splits.split(x, y):
            fold_x, mean, scale = _standardise(x[train])
            theta = l2_logistic(fold_x, y[train].astype(float), candidates)
            held = (x[test] - mean) / scale
            predicted = (held @ theta[:, :-1].T + theta[:, -1] > 0).astype(int)  # (m, k)
            scores += np.mean(predicted == y[test][:, None], axis=0)
        best = float(candidates[int(np.argmax(scores))])
    z, mean, scale = _standardise(x)
    theta = l2_logistic(z, y.astype(float), np.array([best]))[0]
    return LinearRule(mean, scale, theta[:-1], float(theta[-1]), best)
