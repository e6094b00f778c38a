"""One lifecycle for a test: plan its queries, ask them, score each answer, decide.

``plan`` picks the queries from the config and the seed and fits the data-only facts the
decision needs, or says why the test cannot apply; ``word`` turns the queries into requests
that fit the model's context; the harness asks them (``run``, ``ask``: generated text, or
log-probabilities for a ``ScoringTest``); ``score`` turns one query and its answer into a
record; ``decide`` turns the records into the statistic, baseline, p-value and verdict. A
test written this way never calls the model. A ``Rescorable`` test splits its plan into
``pick`` (the queries) and ``prepare`` (the facts for any queries), so ``tabmem.rescore`` can
feed it answers recorded elsewhere, each query found in the dataset by ``locate``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Generic, TypeVar

from tabmem.battery.base import UNORDERED, WRITES_TEXT, TestContext, register, registry
from tabmem.battery.settings import TestSettings
from tabmem.errors import ConfigError
from tabmem.llm.base import LOGPROBS, FitRequest, Request, Response
from tabmem.llm.logprobs import no_logprobs_reason
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.hits import CountRule, HitCount, decide_hits
from tabmem.stats.pvalues import clopper_pearson

Q = TypeVar("Q")
F = TypeVar("F")
L = TypeVar("L", bound="type[Lifecycle[Any, Any]]")
_RESCORABLE: dict[str, Rescorable[Any, Any]] = {}


@dataclass(frozen=True)
class Recorded:
    """One query of a transcript: the prompt as recorded, the part of the data it showed
    (``prefix``), the text it expected if recorded (``suffix``, else ""), the answer, the
    error that replaced the answer if the query failed, and its line in the file (1 = the
    first line after a header), which tests that number their queries use as the query."""

    prompt: str
    prefix: str
    suffix: str
    response: str
    error: str | None = None
    line: int = 0


@dataclass
class Worded(Generic[Q]):
    """The requests for the queries that fit the model's context, those queries in the same
    order, and what the wording used or left out (``context``: numbers the result logs as
    metrics, such as examples dropped, and lists such as the few-shot datasets). Rescored
    answers have no wording, so their context is empty."""

    queries: list[Q]
    requests: list[Any]  # a Request each; a tuple of ScoreRequest for a ScoringTest
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer(Generic[Q]):
    """The ``index``-th answered query of a cell: the query, its prompt text, the answer, and
    the request it was asked with (None for a recorded answer)."""

    index: int
    query: Q
    prompt: str
    response: Response
    request: Any = None


class Lifecycle(ABC, Generic[Q, F]):
    """A test as four steps over queries of type ``Q`` with data-only facts of type ``F``."""

    name: ClassVar[str]
    title: ClassVar[str]  # how progress bars name the test: "row completion"
    nothing_fits: ClassVar[str] = "no query fits the model's context window with its answer"
    needs: ClassVar[frozenset[str]] = WRITES_TEXT  # model capabilities; any one will do
    claims: ClassVar[str]  # what its evidence claims: one of tabmem.battery.base.CLAIMS
    settings: ClassVar[type[TestSettings]]  # the fields of conf/test/<name>.yaml it reads
    reads_dataset: ClassVar[bool] = True  # false: the cell's dataset is ignored (synthetic tasks)
    table_order: ClassVar[int] = UNORDERED  # where the tables list it (the papers' order)
    min_columns: ClassVar[int] = 1  # 2 for a test that asks one column from the others

    def bind(self, ctx: TestContext) -> TestContext:
        """The cell with its config loaded into the test's typed settings (``ctx.params``),
        which every step then reads; a missing, unknown or mistyped setting fails here."""
        if isinstance(ctx.params, self.settings):
            return ctx
        return replace(ctx, params=self.settings.load(ctx.params))

    @abstractmethod
    def plan(self, ctx: TestContext) -> tuple[list[Q], F] | TestResult:
        """The queries the config and the seed choose and the facts the decision needs
        (baselines fitted on the data), or the ``not_applicable`` result that says why the
        test cannot tell on this cell."""

    @abstractmethod
    def word(self, ctx: TestContext, queries: Sequence[Q], facts: F) -> Worded[Q]:
        """Requests for the queries that fit the model's context window (``facts`` from the
        plan, so wording need not redo its work)."""

    @abstractmethod
    def score(self, ctx: TestContext, facts: F, answer: Answer[Q]) -> QueryRecord:
        """One query and its answer as a scored record."""

    @abstractmethod
    def decide(
        self,
        ctx: TestContext,
        facts: F,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        """The records as a result: counts, statistic, baseline, p-value, verdict."""

    def unfit(self, ctx: TestContext, facts: F, worded: Worded[Q]) -> TestResult:
        """The result when no query fits the model's context window."""
        return TestResult.not_applicable(self.name, self.nothing_fits)

    def run(self, ctx: TestContext) -> TestResult:
        """Plan, ask the model, score, decide: the test as the runner runs it."""
        ctx = self.bind(ctx)
        if self.min_columns > 1 and len(ctx.dataset.feature_names) < self.min_columns:
            return TestResult.not_applicable(
                self.name,
                f"the file has {len(ctx.dataset.feature_names)} column; the {self.title} test "
                f"needs at least {self.min_columns}, one to ask and others to ask it from",
            )
        planned = self.plan(ctx)
        if isinstance(planned, TestResult):
            return planned
        return self.run_planned(ctx, *planned)

    def run_planned(self, ctx: TestContext, queries: list[Q], facts: F) -> TestResult:
        """Word, ask the model, score and decide the queries a plan chose (a bound ``ctx``):
        the in-process calibration plans once and runs this per model."""
        worded = self.word(ctx, queries, facts)
        if not worded.requests:
            return self.unfit(ctx, facts, worded)
        responses = self.ask(ctx, worded.requests)
        answers = [
            Answer(
                i,
                query,
                request.as_text() if isinstance(request, Request) else "",
                response,
                request,
            )
            for i, (query, request, response) in enumerate(
                zip(worded.queries, worded.requests, responses, strict=True)
            )
        ]
        return self.judge(ctx, facts, answers, worded.context)

    def ask(self, ctx: TestContext, requests: Sequence[Any]) -> list[Any]:
        """The model's answers to the requests, in order: generated text (cached, retried,
        never raising), or a statistical baseline's labels for ``FitRequest``s."""
        model = ctx.model_for("Asking")
        if requests and all(isinstance(r, FitRequest) for r in requests):
            return model.fit(requests)
        return model.run(requests, description=f"{self.title} test on {ctx.dataset.name}")

    def judge(
        self,
        ctx: TestContext,
        facts: F,
        answers: Sequence[Answer[Q]],
        context: dict[str, Any],
    ) -> TestResult:
        """Score every answer, then decide: the half of the lifecycle that rescoring shares."""
        return self.decide(ctx, facts, [self.score(ctx, facts, a) for a in answers], context)


class ScoringTest(Lifecycle[Q, F]):
    """A test that reads the log-probabilities of texts instead of generated answers: a query's
    request is a tuple of ``ScoreRequest`` and its answer the tuple of their scores."""

    needs = frozenset({LOGPROBS})

    def ask(self, ctx: TestContext, requests: Sequence[Any]) -> list[Any]:
        model = ctx.model_for("Asking")
        flat = [one for group in requests for one in group]
        scores = model.logprobs(flat, description=f"{self.title} on {ctx.dataset.name}")
        if scores is None:
            raise ConfigError(no_logprobs_reason(model))
        grouped, at = [], 0
        for group in requests:
            grouped.append(tuple(scores[at : at + len(group)]))
            at += len(group)
        return grouped


class Rescorable(Lifecycle[Q, F]):
    """A test whose plan splits into picking queries and fitting facts for any queries, so
    that queries found in a transcript (``locate``) can be scored and decided as its own."""

    @abstractmethod
    def pick(self, ctx: TestContext) -> list[Q]:
        """The queries the config and the seed choose, before any wording."""

    @abstractmethod
    def prepare(self, ctx: TestContext, queries: Sequence[Q]) -> F | TestResult:
        """The facts the decision needs for these queries, or why the test cannot tell."""

    @abstractmethod
    def locate(self, ctx: TestContext, recorded: Recorded) -> Q | str:
        """The query a transcript's line asked, found in the dataset, or why it is not found."""

    def settings_for(self, recorded: Sequence[Recorded]) -> dict[str, Any]:
        """Settings a transcript implies for the test (a feature it asks), over the config's."""
        return {}

    def plan(self, ctx: TestContext) -> tuple[list[Q], F] | TestResult:
        queries = self.pick(ctx)
        facts = self.prepare(ctx, queries)
        return facts if isinstance(facts, TestResult) else (queries, facts)


def register_lifecycle(cls: L) -> L:
    """Class decorator: run the test as ``test=<cls.name>`` (and, if it is ``Rescorable``,
    let transcripts be rescored with it)."""
    test = cls()
    if isinstance(test, Rescorable):
        _RESCORABLE[cls.name] = test
    register(cls.name, cls.needs, cls.claims, cls.reads_dataset, cls.table_order)(test.run)
    return cls


def rescorable_test(name: str) -> Rescorable[Any, Any]:
    """The registered test ``name``, able to score recorded answers; an error names those
    that are."""
    tests = registry()
    if name in _RESCORABLE:
        return _RESCORABLE[name]
    known = ", ".join(sorted(_RESCORABLE))
    if name in tests:
        raise ConfigError(f"The {name} test cannot score recorded answers yet; these can: {known}.")
    raise ConfigError(f"Unknown test '{name}'; tests that score recorded answers: {known}.")


def title_of(name: str) -> str:
    """How people read a registered test's name ("row completion"): its class's ``title``,
    the one the progress bars show."""
    return registry()[name].__self__.title


def wording_figures(context: dict[str, Any]) -> dict[str, float]:
    """The numbers of a wording's context, as the result's metrics."""
    return {k: v for k, v in context.items() if isinstance(v, int | float)}


def against_best_predictor(
    ctx: TestContext,
    name: str,
    statistic: str,
    records: Sequence[QueryRecord],
    baseline: float,
    metrics: dict[str, float],
    info: dict[str, Any],
    tables: dict[str, Any] | None = None,
) -> TestResult:
    """The decision of a test whose hits are compared with the rate a data-only model reaches
    at its best (``baseline``): the exact binomial test and the count rule
    (``tabmem.stats.hits``) at the test's ``alpha``, ``weak_alpha`` and ``min_hits``."""
    n = len(records)
    count = HitCount(int(sum(r.score for r in records)), n, baseline)
    decision = decide_hits(statistic, count, count_rule(ctx.params), count.p_value)
    return TestResult(
        test=name,
        verdict=decision.verdict,
        reason=decision.reason,
        n_queries=n,
        n_hits=count.hits,
        rate=count.rate,
        baseline=baseline,
        p_value=count.p_value,
        metrics={**count_metrics(count), **metrics},
        info=info,
        records=list(records),
        tables=tables or {},
    )


def count_metrics(count: HitCount) -> dict[str, float]:
    """The rate's and the share's 95 % intervals, as a count test's metrics."""
    low, high = clopper_pearson(count.hits, count.n)
    share_low, share_high = count.share_interval()
    return {
        "rate_ci_low": low,
        "rate_ci_high": high,
        "share_beyond_baseline": count.share(),
        "share_ci_low": share_low,
        "share_ci_high": share_high,
    }


def count_rule(params: Any) -> CountRule:
    """The count rule's thresholds from a test's settings (``alpha``, ``weak_alpha``,
    ``min_hits``: ``tabmem.stats.hits``)."""
    return CountRule(params.alpha, params.weak_alpha, params.min_hits)
