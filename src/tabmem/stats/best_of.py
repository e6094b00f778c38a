"""The baseline of every count test of rows seen: the best that any data-only predictor we
have reaches on the queries asked, each predictor fitted without the query's row.

A count test (``tabmem.stats.hits``) compares a model's hits with what a model without the
rows reaches at its best. Taking one predictor's accuracy, or the better of two over sampled
rows, leaves a null that another data-only model beats: the Gaussian-copula learner
(``oracle-copula``) got ``evidence`` on iris feature completion at 150 queries on every seed
(25/150 against 0.093, p = 0.0032), because the nearest-neighbour predictor was weaker than
the mode there and the copula's conditional stronger than both. So every test states, per
query, each predictor's chance of being right (1 or 0 for a greedy answer, the probability of
a right draw for a sampling one) (``BestOf``), and the baseline is the best predictor's mean
chance over the queries asked, chosen after seeing them (so at least what any of these
data-only models scores there), or the file rate the test had before where that is higher;
hits are compared with it by the exact binomial tail. The per-query largest chance (which
predictor is right, picked knowing the answer) is not a strategy any model without the rows
can follow, and as a null it cost power without guarding against a model that can be met:
the partial memorizer that knows a fifth of iris's rows went from 17/50, p = 1.9e-5 against
the best single predictor, to p = 0.11 against the per-query best (0.254); the copula learner
it was meant to stop stays at its own predictor's rate, p = 0.5.

``ValuePredictors`` are the predictors of one value of a row given some of its other values,
shared by feature completion, conditional completion and the choice probes: the column's
mode and a draw from its marginal, the greedy answer of a nearest-neighbour model
(``tabmem.stats.neighbours``), and the greedy answer and a draw of the Gaussian copula's
conditional (``tabmem.data.copula_conditional``), all without the query's row; the choice
probes also score their options by gradient-boosted models of each column
(``tabmem.stats.panel_models``), cross-fitted. First token
brings its own (mode, logistic regression, gradient-boosted trees: ``tabmem.stats.predictors``).
"""

from __future__ import annotations

import copy
import hashlib
import heapq
import math
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from tabmem.data.copula_conditional import CopulaConditionals, Prefixes
from tabmem.data.dataset import Dataset
from tabmem.data.population import placed_rows
from tabmem.data.values import normalize_value
from tabmem.stats.formats import column_width
from tabmem.stats.likelihood import Triple
from tabmem.stats.neighbours import NeighbourModel
from tabmem.stats.panel_models import BoostedModel
from tabmem.stats.probes import frequency_rule_hit
from tabmem.stats.uniqueness import text_columns

MODE = "mode"
DRAW = "marginal draw"
NEIGHBOURS = "nearest neighbours"
COPULA = "copula conditional"
COPULA_DRAW = "copula draw"
BOOSTED = "boosted trees"
"""Gradient-boosted models of each column given the others (``tabmem.stats.panel_models``):
the adversary panel's boosted family, which found iris's and wine's real records among the
existence probe's versions far above the other rules (wine: 27/40 against their 0.375)."""
NEIGHBOURS_SCORED = "nearest neighbours by test score"
"""The nearest-neighbour model's per-field log-probabilities (with their distributions'
moments) put through a likelihood test's own score of a row (``FieldStatistic``), as the
model's per-token ones are: a rule that prefers the real row where the test's score would, not
only where the whole record is likelier (a row with no field scored ranks last). On california
housing's twin pairs it prefers the real row in 0.865 of 200 pairs by Min-K%++, where the best
whole-record rule reaches 0.798 and a forest scorer that has read no row 0.842."""
BOOSTED_SCORED = "boosted trees by test score"
"""The boosted models' per-field log-probabilities put through the test's score, as
``NEIGHBOURS_SCORED``."""
CHANCE = "chance"
"""A pick at random among a question's options: 1 / (number of options) on every question."""
FLOOR = "file rate"
"""The name of ``BestOf.floor`` in sentences and metrics."""


FieldStatistic = Callable[[Sequence[Triple], str], float]
"""A likelihood test's score of a row, for the blind check's rules: of one ``Triple`` per
field (in place of the model's per token) and the row's text."""


@dataclass(frozen=True)
class BestOf:
    """Each data-only predictor's chance of being right on each query (rows: queries, columns:
    ``names``); the baseline is the best predictor's mean chance. ``floor``: a file-level rate
    the baseline never goes below (the test's baseline before these predictors)."""

    names: tuple[str, ...]
    chances: np.ndarray
    floor: float = 0.0

    @classmethod
    def of(cls, per_query: Sequence[Mapping[str, float]], floor: float = 0.0) -> BestOf:
        """From one mapping predictor -> chance per query (a predictor missing on a query
        counts 0 there); the names keep their first order of appearance."""
        names = tuple(dict.fromkeys(name for query in per_query for name in query))
        table = np.array(
            [[float(query.get(name, 0.0)) for name in names] for query in per_query], dtype=float
        ).reshape(len(per_query), len(names))
        return cls(names, table, floor)

    @property
    def best_column(self) -> np.ndarray:
        """Each query's chance under the best predictor (zeros without any)."""
        if not self.names or not len(self.chances):
            return np.zeros(len(self.chances))
        return self.chances[:, int(np.argmax(self.chances.mean(axis=0)))]

    @property
    def rate(self) -> float:
        """The baseline: the best predictor's mean chance, or the floor where higher."""
        return max(self.floor, self.best_single)

    @property
    def best_single(self) -> float:
        """The best one predictor's mean chance over the queries (0 without any)."""
        return max(self.accuracies().values(), default=0.0)

    def single_sentence(self) -> str:
        """Each predictor's mean chance, and which one is the best, in words."""
        if not self.names:
            return "no data-only predictor applies"
        accuracies = self.accuracies()
        means = ", ".join(f"{n} {a:.3f}" for n, a in accuracies.items())
        return f"the best of {means}: {max(accuracies, key=accuracies.__getitem__)}"

    def accuracies(self) -> dict[str, float]:
        """Each predictor's mean chance over the queries."""
        if not len(self.chances):
            return dict.fromkeys(self.names, 0.0)
        return {n: float(v) for n, v in zip(self.names, self.chances.mean(axis=0), strict=True)}

    def sentence(self) -> str:
        """Each predictor's mean chance and the one that sets the baseline, in words."""
        floor = f"; {FLOOR} {self.floor:.3f} as a floor" if self.floor else ""
        if self.floor > self.best_single:
            floor += f", above the best predictor's {self.best_single:.3f}: it sets the baseline"
        if not self.names:
            return f"no data-only predictor applies{floor}"
        return f"{self.single_sentence()}{floor}"

    def leader(self) -> str:
        """The predictor that sets the baseline, or the floor where it does ("" when no
        predictor applies)."""
        if self.floor > self.best_single:
            return FLOOR
        accuracies = self.accuracies()
        return max(accuracies, key=accuracies.__getitem__) if accuracies else ""

    def metrics(self) -> dict[str, float]:
        """Each predictor's mean chance as a metric ``baseline_<predictor>``, and the floor."""
        found = {f"baseline_{n.replace(' ', '_')}": a for n, a in self.accuracies().items()}
        return {**found, "baseline_file_rate": self.floor} if self.floor else found


class ValuePredictors:
    """Data-only predictors of one value of a row (rows of raw text fields), each answering
    without the row asked about: the chance of each of being right, per query. A row asked
    about is a data row of the file; of a larger table's predictors asked about a file's rows
    (``placed``), the file's."""

    _places: tuple[int, ...] | None = None

    def __init__(self, rows: Sequence[Sequence[str]]) -> None:
        if not rows:
            raise ValueError("data-only predictors need at least one row")
        width = len(rows[0])
        self.rows = [list((list(r) + [""] * width)[:width]) for r in rows]
        self.neighbours = NeighbourModel(self.rows)
        self.counts = [Counter(normalize_value(r[j]) for r in self.rows) for j in range(width)]

    def placed(self, places: Sequence[int]) -> ValuePredictors:
        """These predictors asked about another file's rows, its data row i being row
        ``places[i]`` here; the fitted models are shared (fitted once however many files
        of one population ask)."""
        _ = self.copula, self.boosted  # made here, so that every view shares them
        view = copy.copy(self)
        view._places = tuple(places)
        return view

    def _at(self, row: int) -> int:
        """The place of a file's data row among these predictors' rows."""
        return row if self._places is None else self._places[row]

    @cached_property
    def copula(self) -> CopulaConditionals:
        return CopulaConditionals(self.rows)

    @cached_property
    def _leaders(self) -> list[list[str]]:
        """Per column, its two values first by (count, value): the mode without one row is
        one of them, or that row's own value."""
        return [
            heapq.nlargest(2, counts, key=lambda v, c=counts: (c[v], v)) for counts in self.counts
        ]

    def chances(
        self,
        target: int,
        given: Mapping[int, str],
        row: int,
        valid: Collection[str],
        predictors: Collection[str] = (MODE, DRAW, NEIGHBOURS, COPULA, COPULA_DRAW),
    ) -> dict[str, float]:
        """Each predictor's chance that its answer for column ``target`` given the ``given``
        values is one of the ``valid`` (normalized) values, fitted without data row ``row``."""
        row = self._at(row)
        valid = {normalize_value(v) for v in valid}
        own = normalize_value(self.rows[row][target])
        out: dict[str, float] = {}
        counts = self.counts[target]
        if MODE in predictors:
            # the mode of the other rows: the leader that is not ``own``, or ``own`` one fewer
            rival = next((v for v in self._leaders[target] if v != own), None)
            mode = own if rival is None else max((counts[rival], rival), (counts[own] - 1, own))[1]
            out[MODE] = float(mode in valid)
        if DRAW in predictors:
            hits = sum(counts[v] - (v == own) for v in valid if v in counts)
            out[DRAW] = hits / max(1, len(self.rows) - 1)
        if NEIGHBOURS in predictors:
            guess = self.neighbours.greedy(target, given, exclude=[row])  # row placed above
            out[NEIGHBOURS] = float(bool(guess) and normalize_value(guess) in valid)
        if COPULA in predictors or COPULA_DRAW in predictors:
            out.update(self._copula(target, given, row, valid, predictors))
        return out

    def _copula(
        self,
        target: int,
        given: Mapping[int, str],
        row: int,
        valid: set[str],
        predictors: Collection[str],
    ) -> dict[str, float]:
        """The copula's greedy answer and a draw from its conditional, without ``row``."""
        known = self.copula
        left_out = [row]
        probabilities = known.probabilities(target, known.evidence(given, left_out), left_out)
        total = float(probabilities.sum())
        if total <= 0:
            return {}
        codes = [known.books[target][v] for v in valid if v in known.books[target]]
        out = {}
        if COPULA in predictors:
            code = known.choose(target, probabilities, None)
            out[COPULA] = float(code is not None and code in codes)
        if COPULA_DRAW in predictors:
            out[COPULA_DRAW] = float(probabilities[codes].sum()) / total if codes else 0.0
        return out

    @cached_property
    def boosted(self) -> BoostedModel:
        """The boosted models of the rows, cross-fitted (fitted on first use: seconds)."""
        digest = hashlib.blake2b("\x1e".join("\x1f".join(r) for r in self.rows).encode())
        return BoostedModel(self.rows, digest.hexdigest()[:16])

    def neighbour_guess(self, target: int, given: Mapping[int, str], row: int) -> str:
        """The nearest-neighbour model's greedy answer for column ``target`` given the
        ``given`` values, without data row ``row``."""
        return self.neighbours.greedy(target, given, exclude=[self._at(row)])

    def choice_scores(
        self, options: Sequence[Mapping[int, str]], scored: Sequence[Collection[int]], row: int
    ) -> dict[str, list[float]]:
        """For a multiple-choice question (each option a full record, scored on its ``scored``
        columns), each data-only rule's score of each option without data row ``row``: the
        nearest-neighbour model's, the copula's (``copula_scores``) and the boosted models'
        log-likelihood of the scored values given the option's others."""
        at = self._at(row)
        return {
            NEIGHBOURS: self.neighbours.choice_scores(options, scored, exclude=[at]),
            COPULA: self._copula_scores(options, scored, at),
            BOOSTED: self.boosted.choice_scores(options, scored, exclude=[at]),
        }

    def copula_scores(
        self, options: Sequence[Mapping[int, str]], scored: Sequence[Collection[int]], row: int
    ) -> list[float]:
        """For a multiple-choice question (each option a full record, scored on its ``scored``
        columns): each option's sum of the copula's conditional log probabilities of those
        values given the option's other values, without data row ``row``."""
        return self._copula_scores(options, scored, self._at(row))

    def _copula_scores(
        self, options: Sequence[Mapping[int, str]], scored: Sequence[Collection[int]], at: int
    ) -> list[float]:
        """``copula_scores`` without row ``at`` of these predictors' rows."""
        known = self.copula
        prefixes: Prefixes = {}
        return [
            sum(known.log_probs_given_rest(o, list(mine), [at], prefixes))
            for o, mine in zip(options, scored, strict=True)
        ]

    def record_choices(
        self,
        questions: Sequence[tuple[Sequence[Sequence[str]], int]],
        statistic: FieldStatistic | None = None,
        texts: Sequence[Sequence[str]] = (),
    ) -> list[dict[str, float]]:
        """``record_choice`` of each question (its options, the real one first, and its data
        row), the boosted models' predictions for all of them made at once."""
        asked = [
            ([dict(enumerate(o)) for o in options], [self._at(row)]) for options, row in questions
        ]
        with self.boosted.batched(asked):
            return [
                self.record_choice(options, 0, row, statistic, texts[i] if texts else ())
                for i, (options, row) in enumerate(questions)
            ]

    def record_choice(
        self,
        options: Sequence[Sequence[str]],
        correct: int,
        row: int,
        statistic: FieldStatistic | None = None,
        texts: Sequence[str] = (),
    ) -> dict[str, float]:
        """For whole records as options (``correct`` the real one, data row ``row``): each
        rule's chance of picking it — the largest sum of log frequencies of the values where
        the options differ (``mode``), of every value's nearest-neighbour and boosted log score
        given the record's other values (as the existence probe scores), of the copula's log
        probability of the differing values given the shared ones (chain rule), all without
        the row — and chance, 1 / (number of options). With a test's ``statistic`` (and the
        options' ``texts``), also the boosted models' per-field scores put through it
        (``NEIGHBOURS_SCORED``, ``BOOSTED_SCORED``)."""
        row = self._at(row)
        records = [dict(enumerate(option)) for option in options]
        normal = [[normalize_value(v) for v in option] for option in options]
        differ = [j for j in range(len(normal[0])) if len({n[j] for n in normal}) > 1]
        own = [normalize_value(v) for v in self.rows[row]]
        frequency = [
            sum(np.log(self.counts[j].get(n[j], 0) - (n[j] == own[j]) + 1.0) for j in differ)
            for n in normal
        ]
        shared = {j: v for j, v in records[0].items() if j not in differ}
        copula = []
        for record in records:
            evidence = self.copula.evidence(shared, [row])
            total = 0.0
            for j in differ:
                total += evidence.log_prob(j, record[j])
                evidence.add(j, record[j])
            copula.append(total)
        every = [list(r) for r in records]
        near = self.neighbours.field_scores(records, every, [row], moments=statistic is not None)
        boosted = self.boosted.field_triples(records, [row], moments=statistic is not None)
        scores = {
            MODE: frequency,
            NEIGHBOURS: [sum(t[0] for t in mine.values()) for mine in near],
            COPULA: copula,
            BOOSTED: [sum(t[0] for t in mine.values()) for mine in boosted],
        }
        if statistic is not None:
            for name, fields, measured in (
                (NEIGHBOURS_SCORED, near, lambda j: not self.neighbours.columns[j].discrete),
                (BOOSTED_SCORED, boosted, self.boosted.is_measurement),
            ):
                scores[name] = [
                    statistic(self.at_precision(mine, measured), text) if mine else -math.inf
                    for mine, text in zip(fields, texts, strict=True)
                ]
        return {**choice_chances(scores, correct), CHANCE: 1.0 / len(options)}

    def at_precision(
        self, fields: Mapping[int, Triple], measured: Callable[[int], bool]
    ) -> list[Triple]:
        """Fields' triples (column -> triple) with each measurement's density (columns
        ``measured`` says a model reads as one) made the probability of its written precision
        (times its last digit's width, ``column_width``), so that measurements and categories
        rank on one scale, as a language model's tokens do."""
        width = self._log_widths
        return [
            (lp + width[j], mean + width[j], sd) if measured(j) else (lp, mean, sd)
            for j, (lp, mean, sd) in fields.items()
        ]

    @cached_property
    def _log_widths(self) -> list[float]:
        """Each column's log last-digit width (its values as the models read them)."""
        return [math.log(column_width(c.values)) for c in self.neighbours.columns]


def choice_chances(scores: Mapping[str, Sequence[float]], correct: int) -> dict[str, float]:
    """Each rule's chance of picking option ``correct`` by its highest score (``scores``: rule
    -> one score per option), ties split evenly."""
    return {name: frequency_rule_hit(mine, correct) for name, mine in scores.items()}


def predictors_of(dataset: Dataset) -> ValuePredictors:
    """The value predictors of a dataset's rows as text; of its population's, asked about the
    file's rows at their places there, where it names one (``tabmem.data.population``)."""

    def rows_of(data: Dataset) -> list[tuple[str, ...]]:
        return list(zip(*text_columns(data).values(), strict=True))

    placed = placed_rows(dataset, rows_of)
    if placed is None:
        return predictors_for(tuple(rows_of(dataset)))
    table, places = placed
    return predictors_for(tuple(table)).placed(places)


@lru_cache(maxsize=16)
def predictors_for(rows: tuple[tuple[str, ...], ...]) -> ValuePredictors:
    """The value predictors of these rows, fitted once per process (the copula takes seconds
    on the larger files: 4.7 s and 35 MB on adult). Sixteen are kept, so that the six paper
    files outlast the twins a calibration worker fits between two seeds of a file."""
    return ValuePredictors(rows)
