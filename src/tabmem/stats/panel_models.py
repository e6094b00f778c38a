"""Data-only models of a table that know its distribution in ways no other baseline does,
cross-fitted (``tabmem.stats.crossfit``) so that none answers from the row it is asked about:
the adversary panel's models (``tabmem.llm.oracle.panel``), and the boosted model's option
scores in the choice probes' baselines (``tabmem.stats.best_of``).

- ``ComponentModel``: a mixture of components, the hub column's classes (``latent=False``:
  each class as a multivariate normal of the measurements, categories by their frequencies in
  the class) or a Gaussian mixture's (``latent=True``, the number of components by BIC).
- ``BoostedModel``: per column, one gradient-boosted model of it given the others.

An answer is a row of the file whose value is the model's: a measurement's row nearest to the
model's number, a category's first row holding it, among the rows not asked about. ``spread``
scales every draw (1: the model's own spread; 0: always the conditional middle).
"""

from __future__ import annotations

import functools
import math
import random
import threading
import warnings
from abc import abstractmethod
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from tabmem.data.copula import hub_column
from tabmem.data.values import normalize_value
from tabmem.kept import Kept
from tabmem.stats.crossfit import CrossFitted, stable_seed
from tabmem.stats.draws import weighted_index
from tabmem.stats.likelihood import Triple, weighted_moments

CATEGORY_VALUES = 10
"""A numeric column with at most this many distinct values is read as a category."""
SMOOTHING = 0.5
"""Added to every category's count per component (a value unseen in a class is possible)."""
MAX_COMPONENTS = 6
"""The Gaussian mixture tries 1 to this many components and keeps the best by BIC."""
RIDGE = 1e-6
"""Added to each covariance's diagonal, relative to the measurement's variance."""
BOOST_CLASSES = 10
"""A boosted classifier tells a column's 10 most frequent values apart; the rarer share one
(shared out by their frequencies)."""
BOOSTING = {"max_iter": 40, "learning_rate": 0.15, "max_leaf_nodes": 15}
"""Each boosted model's size: 40 rounds of trees of 15 leaves (a classifier grows one tree a
class a round, so a fit on adult stays under a second)."""
FITS_KEPT = 512
"""Boosted fits a model keeps, the most recently used (one per fold and column)."""


@functools.cache
def _threads() -> Any:
    """The process's OpenMP thread pools, found once (looking them up costs more than a
    boosted model's one-row prediction)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_thread() -> Any:
    """A context in which scikit-learn's boosting runs on one thread: calibration workers
    share the machine's cores, and a one-row prediction gains nothing from more."""
    return _threads().limit(limits=1, user_api="openmp")


def _tempered(probs: np.ndarray, spread: float, rng: random.Random | None) -> int:
    """The most likely index without ``rng`` or at zero spread; else a draw from the
    probabilities sharpened by the spread (``p ** (1 / spread)``)."""
    if rng is None or spread <= 0:
        return int(np.argmax(probs))
    logs = np.log(np.maximum(probs, 1e-300)) / spread
    weights = np.exp(logs - logs.max())
    return weighted_index(rng, weights)


class _Reading(CrossFitted):
    """What the panel's models share: which rows may answer, and how a number or a category
    chosen by a model becomes a row of the file whose value is it."""

    def allowed(self, asked: Collection[int], among: np.ndarray | None) -> np.ndarray:
        """Rows whose value may be written: not asked about, and ``among`` the mask."""
        allowed = np.ones(self.n_rows, dtype=bool) if among is None else among.copy()
        allowed[list(asked)] = False
        return allowed

    def nearest(self, target: int, number: float, allowed: np.ndarray) -> int:
        """The allowed row whose number in ``target`` is nearest to ``number`` (the first of
        equals), or the first allowed row where none is a number."""
        numbers = self.columns[target].numbers
        assert numbers is not None
        gaps = np.where(allowed & ~np.isnan(numbers), np.abs(numbers - number), np.inf)
        best = int(np.argmin(gaps))
        return best if np.isfinite(gaps[best]) else int(np.flatnonzero(allowed)[0])

    def category(
        self,
        target: int,
        probs: np.ndarray,
        allowed: np.ndarray,
        spread: float,
        rng: random.Random | None,
    ) -> int:
        """A row holding the category chosen from ``probs`` (one per code of the column)
        among the codes that allowed rows hold."""
        codes = self.columns[target].codes
        held = np.bincount(codes[allowed], minlength=len(probs)) > 0
        chosen = _tempered(np.where(held, probs, 0.0), spread, rng)
        return int(np.flatnonzero(allowed & (codes == chosen))[0])

    def is_measurement(self, column: int) -> bool:
        column_ = self.columns[column]
        return column_.numbers is not None and len(column_.book) > CATEGORY_VALUES

    def answer(
        self,
        target: int,
        given: Mapping[int, str],
        spread: float,
        rng: random.Random | None = None,
        exclude: Collection[int] = (),
        protect: bool = True,
        among: np.ndarray | None = None,
    ) -> int | None:
        """A row whose value of ``target`` is the answer (see ``ConditionalModel.pick``)."""
        given, asked, fold = self.question(target, given, exclude, protect)
        allowed = self.allowed(asked, among)
        if not allowed.any():
            return None
        conditional = self._conditional(target, given, fold, spread, rng)
        if isinstance(conditional, np.ndarray):
            return self.category(target, conditional, allowed, spread, rng)
        centre, deviation = conditional
        if rng is not None and spread > 0:
            centre += spread * deviation * rng.gauss(0.0, 1.0)
        return self.nearest(target, centre, allowed)

    @abstractmethod
    def _conditional(
        self,
        target: int,
        given: Mapping[int, str],
        fold: int,
        spread: float,
        rng: random.Random | None,
    ) -> tuple[float, float] | np.ndarray:
        """``target``'s distribution given the ``given`` values, by the fold's fit: a
        measurement's centre and deviation, a category's probability per code (``rng`` and
        ``spread`` choose what the fit reads, where it has parts)."""


@dataclass(frozen=True)
class _Components:
    """One fold's fit: component weights, the measurements' means and covariances per
    component, and each category's probabilities per component."""

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    tables: dict[int, np.ndarray]

    def log_joint(
        self, numbers: Mapping[int, float], codes: Mapping[int, int], dims: Sequence[int]
    ) -> np.ndarray:
        """Per component, log P(component, the given measurements and categories)."""
        logs = np.log(np.maximum(self.weights, 1e-300))
        for column, code in codes.items():
            table = self.tables[column]
            logs = logs + np.log(table[:, code] if code < table.shape[1] else table.min(axis=1))
        given = [dims.index(j) for j in numbers]
        if given:
            x = np.array(list(numbers.values()))
            for k in range(len(logs)):
                logs[k] += _normal_log_density(
                    x, self.means[k, given], self.covariances[k][np.ix_(given, given)]
                )
        return logs

    def conditional(
        self, k: int, target: int, numbers: Mapping[int, float], dims: Sequence[int]
    ) -> tuple[float, float]:
        """Mean and standard deviation of measurement ``target`` in component ``k`` given the
        measurements ``numbers``."""
        t = dims.index(target)
        given = [dims.index(j) for j in numbers if j != target]
        mean, cov = self.means[k], self.covariances[k]
        if not given:
            return float(mean[t]), math.sqrt(max(cov[t, t], 0.0))
        x = np.array([numbers[j] for j in numbers if j != target])
        solve = np.linalg.solve(cov[np.ix_(given, given)], cov[given, t])
        centre = float(mean[t] + solve @ (x - mean[given]))
        variance = float(cov[t, t] - cov[t, given] @ solve)
        return centre, math.sqrt(max(variance, 0.0))


def _normal_log_density(x: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
    """log N(x; mean, cov)."""
    sign, logdet = np.linalg.slogdet(cov)
    if sign <= 0:
        return -1e300
    gap = x - mean
    return float(-0.5 * (gap @ np.linalg.solve(cov, gap) + logdet + len(x) * math.log(2 * math.pi)))


class ComponentModel(_Reading):
    """A table as a mixture of components: the hub column's classes (``latent=False``) or a
    Gaussian mixture's (``latent=True``); measurements normal within a component, categories
    by their frequencies in it."""

    def __init__(self, rows: Sequence[Sequence[str]], name: str, latent: bool) -> None:
        super().__init__(rows, name)
        self.latent = latent
        self.dims = [j for j in range(len(self.columns)) if self.is_measurement(j)]
        self.categorical = [j for j in range(len(self.columns)) if j not in self.dims]
        self.hub = None if latent else hub_column(rows, range(len(self.columns)), self.categorical)
        self._fits: dict[int, _Components] = {}
        self._lock = threading.Lock()

    def _fit(self, fold: int) -> _Components:
        with self._lock:
            if fold not in self._fits:
                self._fits[fold] = self._grow(self.training(fold), fold)
            return self._fits[fold]

    def _measurements(self, rows: np.ndarray) -> np.ndarray:
        """The rows' measurements (rows × dims), a missing one as its column's mean."""
        x = np.zeros((rows.size, len(self.dims)))
        for d, j in enumerate(self.dims):
            numbers = self.columns[j].numbers
            assert numbers is not None
            column = numbers[rows]
            present = column[~np.isnan(column)]
            x[:, d] = np.where(np.isnan(column), present.mean() if present.size else 0.0, column)
        return x

    def _responsibilities(self, x: np.ndarray, rows: np.ndarray, fold: int) -> np.ndarray:
        """Each training row's share in each component (rows × components)."""
        if not self.latent:
            if self.hub is None:
                return np.ones((rows.size, 1))
            codes = self.columns[self.hub].codes[rows]
            return np.eye(len(self.columns[self.hub].book))[codes]
        if x.shape[1] == 0 or rows.size < 10:
            return np.ones((rows.size, 1))
        from sklearn.mixture import GaussianMixture

        scale = x.std(axis=0)
        z = (x - x.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
        best, best_bic = None, math.inf
        for k in range(1, min(MAX_COMPONENTS, rows.size // 10) + 1):
            mixture = GaussianMixture(k, reg_covar=1e-4, random_state=stable_seed(self.name, fold))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mixture.fit(z)
            bic = mixture.bic(z)
            if bic < best_bic:
                best, best_bic = mixture, bic
        assert best is not None
        return best.predict_proba(z)

    def _grow(self, rows: np.ndarray, fold: int) -> _Components:
        x = self._measurements(rows)
        share = self._responsibilities(x, rows, fold)
        mass = share.sum(axis=0)
        keep = mass > 0
        share, mass = share[:, keep], mass[keep]
        means = (share.T @ x) / mass[:, None]
        covariances = np.empty((len(mass), x.shape[1], x.shape[1]))
        floor = RIDGE * np.maximum(x.var(axis=0), 1e-12) if x.size else np.zeros(0)
        for k in range(len(mass)):
            gap = x - means[k]
            covariances[k] = (share[:, k, None] * gap).T @ gap / mass[k] + np.diag(floor)
        tables = {}
        for j in self.categorical:
            codes = self.columns[j].codes[rows]
            counts = np.stack(
                [
                    np.bincount(codes, share[:, k], len(self.columns[j].book))
                    for k in range(len(mass))
                ]
            )
            counts += 1e-9 if j == self.hub else SMOOTHING  # a class holds its own hub value
            tables[j] = counts / counts.sum(axis=1, keepdims=True)
        return _Components(mass / mass.sum(), means, covariances, tables)

    def _given(self, given: Mapping[int, str]) -> tuple[dict[int, float], dict[int, int]]:
        """The given measurements as numbers and categories as codes (an unseen category as
        one code past the column's values)."""
        numbers = {j: self.number(j, v) for j, v in given.items() if j in self.dims}
        books = {j: self.columns[j].book for j in given if j in self.categorical}
        codes = {j: book.get(normalize_value(given[j]), len(book)) for j, book in books.items()}
        return {j: n for j, n in numbers.items() if not math.isnan(n)}, codes

    def _conditional(
        self,
        target: int,
        given: Mapping[int, str],
        fold: int,
        spread: float,
        rng: random.Random | None,
    ) -> tuple[float, float] | np.ndarray:
        fit = self._fit(fold)
        logs = fit.log_joint(*self._given(given), self.dims)
        posterior = np.exp(logs - np.logaddexp.reduce(logs))
        numbers = self._given(given)[0]
        # A component is drawn by its weight when nothing is given (each class as often as
        # the file has it), else from its posterior sharpened by the spread: a sharp sampler
        # keeps to the class its first values chose.
        drawn = rng is not None and not given
        k = weighted_index(rng, posterior) if drawn else _tempered(posterior, spread, rng)
        if target in self.dims:
            return fit.conditional(k, target, numbers, self.dims)
        return fit.tables[target][k]

    def record(self, spread: float, rng: random.Random, asked: Collection[int]) -> list[int]:
        """A whole record drawn at once, as rows whose values it writes: a component by its
        weight, the measurements from its normal at ``spread`` times its covariance (at 0,
        its means), each category from its frequencies in the component."""
        fit = self._fit(self.fold({}, list(asked)))
        allowed = self.allowed(asked, None)
        k = weighted_index(rng, fit.weights)
        x = fit.means[k]
        if spread > 0 and len(self.dims):
            z = np.array([rng.gauss(0.0, 1.0) for _ in self.dims])
            x = x + spread * np.linalg.cholesky(fit.covariances[k]) @ z
        rows = []
        for j in range(len(self.columns)):
            if j in self.dims:
                rows.append(self.nearest(j, float(x[self.dims.index(j)]), allowed))
            else:
                rows.append(self.category(j, fit.tables[j][k], allowed, spread, rng))
        return rows

    def choice_scores(
        self,
        options: Sequence[Mapping[int, str]],
        scored: Sequence[Collection[int]],
        exclude: Collection[int] = (),
    ) -> list[float]:
        """Each option's log-likelihood as a whole record, by the fold that holds out the
        record the options share (as ``ForestModel.choice_scores`` finds it)."""
        usable, _, fold = self.options_asked(options, exclude)
        fit = self._fit(fold)
        return [
            float(np.logaddexp.reduce(fit.log_joint(*self._given(values), self.dims)))
            for values in usable
        ]


@dataclass(frozen=True)
class _Boost:
    """One column's boosted model on one fold: the estimator (None: the column's own
    distribution answers), a category's frequencies among the fold's rows, a measurement's
    mean, its spread, and its residual spread when every other column is given."""

    model: Any | None
    prior: np.ndarray | None
    centre: float = 0.0
    spread: float = 0.0
    residual: float = 0.0

    def deviation(self, given: float) -> float:
        """The residual spread when a ``given`` share of the other columns is shown: from the
        column's own spread (none) to the residual's (all), by variance."""
        return math.sqrt(given * self.residual**2 + (1 - given) * self.spread**2)


class BoostedModel(_Reading):
    """Per asked column, a cross-fitted gradient-boosted model of it given the others. Each
    is fitted once, on the fold's rows twice over: as they are, and with each other column
    hidden (missing) at random half the time, so that one model answers whichever columns a
    prompt shows (histogram boosting routes a missing value down its own branch)."""

    def __init__(self, rows: Sequence[Sequence[str]], name: str) -> None:
        super().__init__(rows, name)
        self._fits: Kept[_Boost] = Kept(FITS_KEPT)
        self._ready: dict[tuple[int, int, bytes], Any] = {}

    @contextmanager
    def batched(
        self, questions: Iterable[tuple[Sequence[Mapping[int, str]], Collection[int]]]
    ) -> Iterator[None]:
        """Within it, what ``field_triples`` asks of these questions (whole records as options,
        the rows left out) is predicted already, all at once per fold and column: a one-row
        prediction costs scikit-learn a pass over its trees in Python, most of a blind check's
        time, and a batch costs about one. Each row's prediction is the same number either way."""
        asked: dict[tuple[int, int], list[np.ndarray]] = {}
        for options, exclude in questions:
            usable, _, fold = self.options_asked(options, exclude)
            for values in usable:
                for target in values:
                    given = {j: v for j, v in values.items() if j != target}
                    asked.setdefault((fold, target), []).append(self._inputs(target, given)[0])
        for (fold, target), rows in asked.items():
            fit = self._fit(fold, target)
            if fit.model is None:
                continue
            inputs = np.array(rows)
            for row, answer in zip(inputs, self._predict(target, fit, inputs), strict=True):
                self._ready[(fold, target, row.tobytes())] = answer
        try:
            yield
        finally:
            self._ready.clear()

    def _predicted(self, fold: int, target: int, fit: _Boost, given: Mapping[int, str]) -> Any:
        """The fit's prediction for the shown columns: a measurement's value, a category's
        class probabilities (made in ``batched`` already, or now)."""
        inputs = self._inputs(target, given)
        ready = self._ready.get((fold, target, inputs[0].tobytes()))
        return ready if ready is not None else self._predict(target, fit, inputs)[0]

    def _predict(self, target: int, fit: _Boost, inputs: np.ndarray) -> np.ndarray:
        """The fit's predictions for rows of inputs: values, or class probabilities."""
        assert fit.model is not None
        with _one_thread():
            if self.is_measurement(target):
                return fit.model.predict(inputs)
            return fit.model.predict_proba(inputs)

    def _fit(self, fold: int, target: int) -> _Boost:
        return self._fits.get((fold, target), lambda: self._grow(fold, target))

    def _others(self, target: int) -> list[int]:
        return [j for j in range(len(self.columns)) if j != target]

    def _grow(self, fold: int, target: int) -> _Boost:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        rows = self.training(fold)
        column = self.columns[target]
        x = self.features[np.ix_(rows, self._others(target))].astype(np.float64)
        seed = stable_seed(self.name, "boosted", fold, target)
        hidden = np.random.default_rng(seed).random(x.shape) < 0.5
        inputs = np.vstack([x, np.where(hidden, np.nan, x)])
        if self.is_measurement(target):
            assert column.numbers is not None
            y = column.numbers[rows]
            present = ~np.isnan(y)
            values = y[present]
            centre = float(values.mean()) if values.size else 0.0
            spread = float(values.std()) if values.size else 0.0
            if not x.shape[1] or present.sum() < 20:
                return _Boost(None, None, centre, spread, spread)
            model: Any = HistGradientBoostingRegressor(**BOOSTING, random_state=seed)
            with _one_thread():
                model.fit(inputs[np.tile(present, 2)], np.tile(values, 2))
                residual = values - model.predict(x[present])
            return _Boost(model, None, centre, spread, float(residual.std()))
        codes = column.codes[rows]
        prior = np.bincount(codes, minlength=len(column.book)) + SMOOTHING
        prior = prior / prior.sum()
        frequent = np.argsort(-np.bincount(codes, minlength=len(column.book)))[:BOOST_CLASSES]
        y = np.where(np.isin(codes, frequent), codes, -1)
        if not x.shape[1] or np.unique(y).size < 2:
            return _Boost(None, prior)
        model = HistGradientBoostingClassifier(**BOOSTING, random_state=seed)
        with _one_thread(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(inputs, np.tile(y, 2))
        return _Boost(model, prior)

    def _inputs(self, target: int, given: Mapping[int, str]) -> np.ndarray:
        """The other columns as the model's input, a column not given as missing."""
        return np.array(
            [[self.feature(j, given[j]) if j in given else np.nan for j in self._others(target)]]
        )

    def _probabilities(
        self, fold: int, target: int, fit: _Boost, given: Mapping[int, str]
    ) -> np.ndarray:
        """A category's probability per code of the column: the classifier's, its rare class
        shared out by frequency, mixed with 1 % of the frequencies (no value impossible)."""
        assert fit.prior is not None
        if fit.model is None:
            return fit.prior
        proba = self._predicted(fold, target, fit, given)
        out = np.zeros_like(fit.prior)
        classes = fit.model.classes_
        rare = np.ones(len(out), dtype=bool)
        rare[classes[classes >= 0]] = False
        for code, p in zip(classes.tolist(), proba.tolist(), strict=True):
            if code >= 0:
                out[code] += p
            elif rare.any():
                out[rare] += p * fit.prior[rare] / fit.prior[rare].sum()
        return 0.99 * out + 0.01 * fit.prior

    def _centre(
        self, fold: int, target: int, fit: _Boost, given: Mapping[int, str]
    ) -> tuple[float, float]:
        """A measurement's predicted value and residual spread given the shown columns."""
        if fit.model is None:
            return fit.centre, fit.spread
        centre = float(self._predicted(fold, target, fit, given))
        shown = len([j for j in given if j != target]) / max(1, len(self.columns) - 1)
        return centre, fit.deviation(shown)

    def _conditional(
        self,
        target: int,
        given: Mapping[int, str],
        fold: int,
        spread: float,
        rng: random.Random | None,
    ) -> tuple[float, float] | np.ndarray:
        fit = self._fit(fold, target)
        if self.is_measurement(target):
            return self._centre(fold, target, fit, given)
        return self._probabilities(fold, target, fit, given)

    def choice_scores(
        self,
        options: Sequence[Mapping[int, str]],
        scored: Sequence[Collection[int]],
        exclude: Collection[int] = (),
    ) -> list[float]:
        """Each option's log-likelihood: over its ``scored`` columns, the value's log
        probability (a measurement: normal log density) given the option's other values."""
        usable, _, fold = self.options_asked(options, exclude)
        return [
            sum(self._log_score(j, values, fold) for j in mine if j in values)
            for values, mine in zip(usable, scored, strict=True)
        ]

    def field_triples(
        self,
        options: Sequence[Mapping[int, str]],
        exclude: Collection[int] = (),
        moments: bool = False,
    ) -> list[dict[int, Triple]]:
        """Per option (a whole record), each of its values' ``_triple`` given the record's
        other values (column -> triple, in column order), by the fold that holds out the
        record the options share; a value the fits cannot read is left out (as
        ``choice_scores`` leaves it)."""
        usable, _, fold = self.options_asked(options, exclude)
        return [
            {j: self._triple(j, values, fold, moments) for j in sorted(values)} for values in usable
        ]

    def _log_score(self, target: int, record: Mapping[int, str], fold: int) -> float:
        return self._triple(target, record, fold, moments=False)[0]

    def _triple(
        self, target: int, record: Mapping[int, str], fold: int, moments: bool = True
    ) -> Triple:
        """The value's log score given the record's others (a category: its log probability;
        a measurement: the normal log density), with the mean and sd of that log score over
        the same conditional distribution (a normal's: -1/2 - log(sd sqrt(2 pi)) and
        sqrt(1/2)); without ``moments`` a category's are 0."""
        given = {j: v for j, v in record.items() if j != target}
        fit = self._fit(fold, target)
        if self.is_measurement(target):
            number = self.number(target, record[target])
            if math.isnan(number):
                return math.log(1e-300), math.log(1e-300), 0.0
            centre, deviation = self._centre(fold, target, fit, given)
            deviation = max(deviation, 1e-9)
            z = (number - centre) / deviation
            offset = math.log(deviation * math.sqrt(2 * math.pi))
            return -0.5 * z * z - offset, -0.5 - offset, math.sqrt(0.5)
        code = self.columns[target].book.get(normalize_value(record[target]))
        probs = self._probabilities(fold, target, fit, given)
        mean, sd = weighted_moments(np.log(probs), probs) if moments else (0.0, 0.0)
        if code is None:
            return math.log(1e-300), mean, sd
        return math.log(float(probs[code])), mean, sd
