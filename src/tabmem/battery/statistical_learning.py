"""In-context statistical learning (``test=statistical_learning``; second paper, Figure 3).

Each query is a fresh synthetic problem (``tabmem.data.linear_problems``): ``shots`` points
x ~ N(0, I_d) labelled y = 1[x·z >= 0], half of each label as in the paper, shown in the
statistical format (``IF X1 = 0.53, X2 = -1.20, THEN Y =``), then one more point to label.
The same points train the paper's logistic regression (C by cross-validation) and a
1-nearest-neighbour classifier, which label the same test point, so the three accuracies are
paired. Two sweeps: the dimension d grows at ``fixed_shots`` shots, and the number of shots
grows at ``fixed_dimension``. The dataset and the transform of the cell play no part: the
problems are new, so nothing can have been memorized.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, Lifecycle, Worded, register_lifecycle
from tabmem.battery.settings import TestSettings
from tabmem.data.linear_problems import LinearProblem, linear_problem
from tabmem.errors import ConfigError
from tabmem.llm.base import FIT, GENERATE, FitRequest, Request
from tabmem.prompts.fewshot import fit_to_context
from tabmem.prompts.ifthen import IfThenFormat, ifthen_request
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.accuracy import Accuracy, p_above
from tabmem.stats.classifiers import random_search_logistic
from tabmem.stats.labels import parse_label
from tabmem.stats.verdicts import decide


@dataclass(frozen=True)
class StatisticalLearningSettings(TestSettings):
    """``conf/test/statistical_learning.yaml``."""

    dimensions: list[int]
    fixed_shots: int
    shots: list[int]
    fixed_dimension: int
    n_problems: int
    decimals: int
    lr_c_range: list[float]
    lr_c_draws: int
    lr_cv_folds: int
    lr_cv_folds_few_shots: int
    lr_few_shots: int
    alpha: float
    min_effect: float
    question: str
    pair: str
    joiner: str
    system_prompt: str


NAME = "statistical_learning"
LABELS = ("0", "1")
LEARNERS = ("model", "logistic_regression", "nearest_neighbour")


@dataclass
class Query:
    """One problem (None once read back from its record), its true label, and the answers of
    the model and the two reference learners."""

    dimension: int
    shots: int
    problem: LinearProblem | None
    expected: str
    prompt: str = ""
    completion: str = ""
    answer: str | None = None
    error: str | None = None
    reference: dict[str, str] = field(default_factory=dict)

    def correct(self, learner: str) -> bool:
        if learner == "model":
            return self.error is None and self.answer == self.expected
        return self.reference[learner] == self.expected


def settings(params: StatisticalLearningSettings) -> list[tuple[int, int]]:
    """The (dimension, shots) pairs of both sweeps, each once."""
    shots = params.fixed_shots
    dimension = params.fixed_dimension
    pairs = {(d, shots) for d in params.dimensions}
    pairs |= {(dimension, s) for s in params.shots}
    return sorted(pairs)


def reference_labels(
    problem: LinearProblem, params: StatisticalLearningSettings, rng: np.random.Generator
) -> dict[str, str]:
    """The paper's logistic regression (``random_search_logistic``) and 1-nearest-neighbour,
    trained on the problem's shots."""
    x, y, test = problem.train_x, problem.train_y, problem.test_x.reshape(1, -1)
    if len(set(y.tolist())) < 2:
        only = str(int(y[0]))
        return {"logistic_regression": only, "nearest_neighbour": only}
    few = len(y) <= params.lr_few_shots
    folds = params.lr_cv_folds_few_shots if few else params.lr_cv_folds
    low, high = params.lr_c_range
    draws = params.lr_c_draws
    with threadpool_limits(limits=1):
        lr = random_search_logistic(x, y, folds, draws, (low, high), rng).predict(test)[0]
        knn = KNeighborsClassifier(n_neighbors=1).fit(x, y).predict(test)[0]
    return {"logistic_regression": str(int(lr)), "nearest_neighbour": str(int(knn))}


def _names(dimension: int) -> list[str]:
    return [f"X{j + 1}" for j in range(dimension)]


def _text(values: np.ndarray, decimals: int) -> list[str]:
    return [f"{v:.{decimals}f}" for v in values]


def _model_request(
    ctx: TestContext, query: Query, fmt: IfThenFormat, decimals: int
) -> Request | None:
    """The prompt of one problem: its shots as examples, then its test point; None when it
    does not fit the context window (no example can be dropped: a problem's shots are its data)."""
    model = ctx.model
    if model is None or query.problem is None:
        raise ConfigError("Wording a test's requests needs a model and a problem.")
    chat = model.prompt_form == "chat"
    system = " ".join(ctx.params.system_prompt.split())
    params = ctx.greedy_answer(8)
    names = _names(query.dimension)
    problem = query.problem
    shots = [
        (fmt.ask(names, _text(x, decimals), "Y"), str(int(y)))
        for x, y in zip(problem.train_x, problem.train_y, strict=True)
    ]
    question = fmt.ask(names, _text(problem.test_x, decimals), "Y")
    request = ifthen_request(chat, system, shots, question, params)
    return fit_to_context(
        lambda _, r=request: r, 0, model.count_tokens, model.context_window, params
    ).request


def _fit_request(query: Query, model: str, seed: int) -> FitRequest:
    """A baseline's request: fit on the problem's shots, label its test point."""
    problem = query.problem
    if problem is None:
        raise ConfigError("A fit request needs the problem.")
    names = _names(query.dimension)
    return FitRequest(
        train=pd.DataFrame(problem.train_x, columns=names),
        labels=tuple(str(int(y)) for y in problem.train_y),
        test=pd.DataFrame(problem.test_x.reshape(1, -1), columns=names),
        kinds=tuple((n, "numeric") for n in names),
        seed=seed,
        row=0,
        prompt=f"{model} on {query.shots} points in {query.dimension} dims",
    )


def curves(queries: Sequence[Query]) -> pd.DataFrame:
    """Accuracy with a 95 % interval per (dimension, shots) and learner."""
    rows = []
    keys = sorted({(q.dimension, q.shots) for q in queries})
    for dimension, shots in keys:
        group = [q for q in queries if (q.dimension, q.shots) == (dimension, shots)]
        for learner in LEARNERS:
            accuracy = Accuracy(sum(q.correct(learner) for q in group), len(group))
            low, high = accuracy.interval
            rows.append(
                {
                    "dimension": dimension,
                    "shots": shots,
                    "learner": learner,
                    "accuracy": accuracy.rate,
                    "ci_low": low,
                    "ci_high": high,
                    "n": accuracy.n,
                }
            )
    return pd.DataFrame(rows)


def figure(table: pd.DataFrame, params: StatisticalLearningSettings) -> Any:
    """Two panels: accuracy against the dimension, and against the number of shots."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    panels = (
        ("dimension", "shots", params.fixed_shots, "dimension d"),
        ("shots", "dimension", params.fixed_dimension, "number of shots"),
    )
    for axis, (x, fixed, value, label) in zip(fig.subplots(1, 2), panels, strict=True):
        part = table[table[fixed] == value]
        for learner in LEARNERS:
            line = part[part["learner"] == learner].sort_values(x)
            axis.plot(line[x], line["accuracy"], marker="o", label=learner)
            axis.fill_between(line[x], line["ci_low"], line["ci_high"], alpha=0.2)
        axis.axhline(0.5, color="grey", linestyle=":")
        axis.set_xscale("log", base=2)
        axis.set_xlabel(label)
        axis.set_ylabel("accuracy")
        axis.set_title(f"{fixed} = {value}")
        axis.legend()
    fig.tight_layout()
    return fig


def _metrics(table: pd.DataFrame) -> dict[str, float]:
    prefix = {"model": "", "logistic_regression": "lr_", "nearest_neighbour": "knn_"}
    return {
        f"{prefix[r.learner]}accuracy_d{r.dimension}_k{r.shots}": float(r.accuracy)
        for r in table.itertuples()
    }


@register_lifecycle
class StatisticalLearning(Lifecycle[Query, None]):
    """Ask the model (or fit the baseline) on fresh synthetic problems; compare with LR and 1-NN."""

    name = NAME
    claims = "learning"
    title = NAME
    reads_dataset = False
    settings = StatisticalLearningSettings
    needs = frozenset({GENERATE, FIT})
    nothing_fits = "no problem fits the model's context window"

    def plan(self, ctx: TestContext) -> tuple[list[Query], None]:
        p = ctx.params
        decimals = p.decimals
        n = p.n_problems
        problems = [
            (d, k, linear_problem(d, k, np.random.default_rng([ctx.seed, d, k, q]), decimals))
            for d, k in settings(p)
            for q in range(n)
        ]
        queries = [
            Query(
                d,
                k,
                problem,
                str(problem.test_y),
                reference=reference_labels(
                    problem, p, np.random.default_rng([ctx.seed, number, 1])
                ),
            )
            for number, (d, k, problem) in enumerate(problems)
        ]
        return queries, None

    def word(self, ctx: TestContext, queries: Sequence[Query], facts: None) -> Worded[Query]:
        model = ctx.model_for("Wording")
        if GENERATE not in model.capabilities:
            requests = [_fit_request(q, model.name, ctx.seed + i) for i, q in enumerate(queries)]
            return Worded(list(queries), list(requests), {"queries_skipped": 0})
        fmt, decimals = (
            IfThenFormat(ctx.params.question, ctx.params.pair, ctx.params.joiner),
            ctx.params.decimals,
        )
        worded: Worded[Query] = Worded([], [])
        for query in queries:
            request = _model_request(ctx, query, fmt, decimals)
            if request is not None:
                worded.queries.append(query)
                worded.requests.append(request)
        worded.context = {"queries_skipped": len(queries) - len(worded.queries)}
        return worded

    def score(self, ctx: TestContext, facts: None, answer: Answer[Query]) -> QueryRecord:
        query, response = answer.query, answer.response
        fitted = isinstance(answer.request, FitRequest)
        if fitted:
            parsed: str | None = response.text
        else:
            parsed = None if response.error else parse_label(response.text, LABELS, "Y")
        hit = response.error is None and parsed == query.expected
        return QueryRecord(
            prompt=answer.request.prompt if fitted else answer.prompt,
            expected=query.expected,
            completion=response.text,
            score=1.0 if hit else 0.0,
            error=response.error,
            extra={
                "dimension": query.dimension,
                "shots": query.shots,
                "parsed": parsed or "",
                "unparseable": response.error is None and parsed is None,
                "logistic_regression": query.reference["logistic_regression"],
                "nearest_neighbour": query.reference["nearest_neighbour"],
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: None,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        queries = [_answered(r) for r in records]
        result = _result(ctx, queries, int(context.get("queries_skipped", 0)))
        result.records = list(records)
        return result


def _answered(record: QueryRecord) -> Query:
    """A record read back as the problem's answers the decision counts."""
    extra = record.extra
    return Query(
        dimension=int(extra["dimension"]),
        shots=int(extra["shots"]),
        problem=None,
        expected=record.expected,
        prompt=record.prompt,
        completion=record.completion,
        answer=extra["parsed"] or None,
        error=record.error,
        reference={k: extra[k] for k in ("logistic_regression", "nearest_neighbour")},
    )


def _result(ctx: TestContext, queries: list[Query], skipped: int) -> TestResult:
    p = ctx.params
    alpha, min_effect = p.alpha, p.min_effect
    overall = {
        learner: Accuracy(sum(q.correct(learner) for q in queries), len(queries))
        for learner in LEARNERS
    }
    model = overall["model"]
    p_value = p_above(model.correct, model.n, 0.5)
    statistic = f"accuracy {model.rate:.3f} over chance (0.5) on {model.n} problems"
    decision = decide(statistic, p_value, model.rate - 0.5, alpha, min_effect)
    table = curves(queries)
    low, high = model.interval
    unparseable = sum(1 for q in queries if q.error is None and q.answer is None)
    return TestResult(
        test=NAME,
        verdict=decision.verdict,
        reason=decision.reason,
        n_queries=model.n,
        n_hits=model.correct,
        rate=model.rate,
        baseline=0.5,
        p_value=p_value,
        metrics={
            "accuracy": model.rate,
            "accuracy_ci_low": low,
            "accuracy_ci_high": high,
            "lr_accuracy": overall["logistic_regression"].rate,
            "knn_accuracy": overall["nearest_neighbour"].rate,
            "n_unparseable": unparseable,
            "queries_skipped": skipped,
            **_metrics(table),
        },
        info={
            "evidence_rule": (
                f"one-sided binomial p < {alpha:g} against chance (0.5) and accuracy at least "
                f"{min_effect:g} above it"
            ),
            "settings": [list(s) for s in settings(p)],
            "prompt_form": (
                "baseline"
                if ctx.model is not None and GENERATE not in ctx.model.capabilities
                else ctx.prompt_form
            ),
        },
        records=[
            QueryRecord(
                prompt=q.prompt,
                expected=q.expected,
                completion=q.completion,
                score=1.0 if q.correct("model") else 0.0,
                error=q.error,
                extra={
                    "dimension": q.dimension,
                    "shots": q.shots,
                    "parsed": q.answer or "",
                    "unparseable": q.error is None and q.answer is None,
                    "logistic_regression": q.reference["logistic_regression"],
                    "nearest_neighbour": q.reference["nearest_neighbour"],
                },
            )
            for q in queries
        ],
        tables={"curves.json": table},
        figures={"statistical_learning.png": figure(table, p)},
    )
