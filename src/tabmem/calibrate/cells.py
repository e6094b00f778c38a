"""Calibration cells run in this process: each test's own lifecycle against the reference
models' Python objects, with no HTTP server, no subprocess, no MLflow and no response cache
on disk.

A reference model reaches a test as a ``LanguageModel`` over ``OracleObjectBackend``, which
does what the oracle server does with a request (``tabmem.llm.oracle.server``): a chat
request is its last user message answered with ``chat=True``, a completion its prompt; both
with the request's ``max_tokens``, ``stop``, ``seed`` and ``temperature``. The ``LanguageModel``
around it cuts the answer where a stop rule settles the score, as it does for the served
models, so a test sees the same text either way (``tests/integration/test_calibrate_inprocess.py``
compares cells with the real grid). A model's answers are kept for its job, as the grid's
response cache keeps them: a test that asks another's questions (first token asks row
completion's) is served them again instead of asked.

A *job* is one dataset (original or twin) at one seed and one query setting: every test of
rows seen is planned once (its queries and data-only baselines depend on the dataset, the
settings and the seed, and on the model only through its prompt form, context window and
token counter, which every reference model shares) and then worded, asked, scored and decided
for each model of the job, exactly as ``Lifecycle.run`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from tabmem.battery.base import TestContext, claiming, inapplicable_reason, registry, run_test
from tabmem.battery.lifecycle import Lifecycle
from tabmem.data import Dataset, load_dataset
from tabmem.data.transforms import apply_transform
from tabmem.llm.base import GENERATE, BaseBackend, GenerationParams, Message, capabilities_of
from tabmem.llm.client import LanguageModel
from tabmem.llm.oracle import ORACLES, Oracle, last_user_text, load_available_datasets
from tabmem.llm.oracle.catalog import at_spread, split_spread, spread_oracle
from tabmem.llm.oracle.partial import RESTS, PartialOracle, Recall
from tabmem.results import TestResult

NEGATIVE_ORACLES = (
    "oracle-null",
    "oracle-marginal",
    "oracle-learner",
    "oracle-copula",
    "oracle-forest",
    "oracle-moments-t0.25",
    "oracle-moments-t0",
    "oracle-mixture-t0.25",
    "oracle-boosted-t0.25",
)
"""The reference models that know no row, in the order the tables list them (those the
catalog ``ORACLES`` holds): the first five, and the adversary panel
(``tabmem.llm.oracle.panel``) at the spreads that write nearest the data's modes."""
BASELINE_SHARED = {
    "oracle-marginal": "the sample test's copy null draws independent marginals",
    "oracle-learner": "the count tests' baselines include its nearest-neighbour predictor",
    "oracle-copula": "the count tests' baselines and the sample test's copy null use its copulas",
    "oracle-boosted-t0.25": "the choice probes' baselines score options by its boosted models",
}
"""The negatives that share a model with some test's baseline, and which: they sit at that
test's null by construction, so they prove little about it."""
TWIN_MODEL = "oracle-memorizer"
"""The model run on twins: it has every real file by heart and none of a twin's rows."""


class OracleObjectBackend(BaseBackend):
    """A reference model's Python object as a backend: the oracle server's request handling
    without the server (no prompt caching report, no thinking variants), and no CSV row
    drafted past where the request's stop rule settles it. An answer depends on nothing but
    what the oracle is handed (text, budget, stops, seed, temperature, chat, stop rule), so
    each is computed once and kept for the backend's life (one job).

    It scores text (and gives the moments) where its oracle does (``oracle-scorer``); the
    class itself declares text only, which is what the tables say of the oracles that
    answer in text (``calibrate.run.inapplicable_reasons``)."""

    capabilities: frozenset[str] = frozenset({GENERATE})

    def __init__(self, oracle: Oracle, model_id: str) -> None:
        self.oracle = oracle
        self.identity = {"provider": "oracle-in-process", "model": model_id}
        self.capabilities = capabilities_of(oracle)
        self._answers: dict[tuple[Any, ...], str] = {}

    def logprobs(self, text: str, context: str = "") -> list[float] | None:
        """The oracle's log-probability of each token of ``text`` after ``context`` (None
        from an oracle that scores no text)."""
        score = getattr(self.oracle, "logprobs", None)
        return score(text, context) if callable(score) else None

    def logprob_moments_batch(
        self, items: list[tuple[str, str]]
    ) -> list[list[tuple[float, float, float]]]:
        """The oracle's (log-probability, mean, sd) per token of each (context, text) pair;
        only called where ``capabilities`` has ``token_moments``."""
        return self.oracle.logprob_moments_batch(items)  # type: ignore[attr-defined]

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        prompt = last_user_text(messages)
        if prompt is None:
            raise ValueError("a chat request without a user message")
        return self._answer(prompt, params, chat=True)

    def complete(self, prompt: str, params: GenerationParams) -> str:
        return self._answer(prompt, params, chat=False)

    def _answer(self, prompt: str, params: GenerationParams, chat: bool) -> str:
        stop, rule = tuple(params.stop), params.stop_rule
        key = (prompt, params.max_tokens, stop, params.seed, params.temperature, chat, rule)
        if key not in self._answers:
            # The oracle drafts until the stop rule settles the score, as the embedded model
            # generates (with stop strings too, one could straddle that point: all is drafted).
            done = None if rule is None or stop else (lambda text: rule.end(text) is not None)
            answer = self.oracle.answer(
                prompt,
                params.max_tokens,
                list(stop),
                params.seed,
                params.temperature,
                chat=chat,
                settled=done,
            )
            self._answers[key] = answer.text
        return self._answers[key]


@dataclass(frozen=True)
class ModelSpec:
    """One reference model of a job: a catalog oracle by name (a panel family at a
    ``spread``), or a partial memorizer."""

    name: str
    recall: Recall | None = None
    spread: float | None = None

    @classmethod
    def of(cls, model_id: str) -> ModelSpec:
        """The spec of a catalog oracle's model name (a panel family's with its spread)."""
        name, spread = split_spread(model_id)
        return cls(name, spread=spread)

    @property
    def model_id(self) -> str:
        """The name the oracle server would answer to."""
        return (
            self.recall.model_id if self.recall is not None else at_spread(self.name, self.spread)
        )


@dataclass(frozen=True)
class Job:
    """A dataset at a seed and a query setting, the models and tests to run on it, and the
    settings at which a test with the same config counts these cells too (``also``)."""

    dataset: str
    transform: str
    seed: int
    setting: str
    models: tuple[ModelSpec, ...]
    tests: tuple[str, ...]
    also: tuple[str, ...] = ()


@dataclass
class World:
    """What a process loads once: the configs composed by the caller (test settings per
    setting, dataset and transform configs, each model's prompt form and context window), the
    datasets every oracle knows, the oracles, and the datasets and twins asked about."""

    settings: Mapping[str, Mapping[str, Mapping[str, Any]]]
    dataset_configs: Mapping[str, Mapping[str, Any]]
    transform_configs: Mapping[str, Mapping[str, Any]]
    model_form: tuple[str, int] = ("chat", 1_000_000)
    _known: list[Dataset] = field(default_factory=list)
    _oracles: dict[str, Oracle] = field(default_factory=dict)
    _data: dict[tuple[str, str, int], Dataset] = field(default_factory=dict)

    def known(self) -> list[Dataset]:
        """Every dataset whose file is present: what the oracle server's models know."""
        if not self._known:
            self._known.extend(load_available_datasets())
        return self._known

    def oracle(self, spec: ModelSpec) -> Oracle:
        """The oracle of ``spec``: a catalog oracle built on first use and kept; a partial
        memorizer built for its job (one per share, seed and rest), with the kept catalog
        oracle as its rest."""
        if spec.recall is None:
            key = spec.model_id
            if key not in self._oracles:
                built = spread_oracle(key, self.known())
                self._oracles[key] = built or ORACLES[spec.name](self.known())
            return self._oracles[key]
        partial = PartialOracle(self.known(), spec.recall)
        # The rest answers from the prompt and the seed alone: one instance (and its fitted
        # neighbours or forests) serves every share and seed of a process.
        partial.rest = self.oracle(ModelSpec(RESTS[spec.recall.rest].model_name))
        return partial

    def model(self, spec: ModelSpec) -> LanguageModel:
        """A ``LanguageModel`` over the oracle object: no response cache, one query at a
        time, quiet."""
        form, window = self.model_form
        backend = OracleObjectBackend(self.oracle(spec), spec.model_id)
        return LanguageModel(backend, spec.name, form, window, None, 1, show_progress=False)

    def dataset(self, name: str, transform: str, seed: int) -> Dataset:
        """The dataset as the cell sees it, loaded once; a twin depends on the seed, and only
        the latest twin of each file is kept (both settings of a seed ask it)."""
        key = (name, transform, seed if transform != "original" else 0)
        if key not in self._data:
            if transform != "original":
                for old in [k for k in self._data if k[:2] == (name, transform)]:
                    del self._data[old]
            base = load_dataset(self.dataset_configs[name])
            self._data[key] = apply_transform(base, self.transform_configs[transform], seed)
        return self._data[key]


@cache
def rows_seen_tests() -> tuple[str, ...]:
    """The registered tests whose evidence claims the model has seen the rows."""
    return tuple(claiming("rows_seen"))


def lifecycle_of(test: str) -> Lifecycle[Any, Any] | None:
    """The lifecycle object behind a registered test, or None for a plain test function."""
    owner = getattr(registry()[test], "__self__", None)
    return owner if isinstance(owner, Lifecycle) else None


def run_job(world: World, job: Job) -> list[dict[str, Any]]:
    """Every model × test cell of ``job``: one row per cell (``cell_row``'s fields)."""
    dataset = world.dataset(job.dataset, job.transform, job.seed)
    models = [(spec, world.model(spec)) for spec in job.models]
    rows = []
    for test in job.tests:
        params = world.settings[job.setting][test]
        results = run_shared(test, dataset, params, job.seed, [m for _, m in models])
        same = [s for s in job.also if world.settings[s][test] == params]
        for (spec, _), result in zip(models, results, strict=True):
            row = cell_row(job, spec, dataset.name, result)
            rows += [row, *({**row, "setting": setting} for setting in same)]
    return rows


def run_shared(
    test: str, dataset: Dataset, params: Any, seed: int, models: Sequence[LanguageModel]
) -> list[TestResult]:
    """Test ``test`` on one cell per model, planned once: ``Lifecycle.run``'s steps with the
    plan shared (``run_test`` for a test that is no lifecycle); a model the test cannot use
    gets ``not_applicable`` with the reason, as ``run_test`` gives it."""
    lifecycle = lifecycle_of(test)
    contexts = [TestContext(dataset, model, params, seed) for model in models]
    if lifecycle is None:
        return [run_test(test, ctx) for ctx in contexts]
    results: list[TestResult | None] = [None] * len(models)
    runnable = []
    for i, model in enumerate(models):
        reason = inapplicable_reason(test, model)
        if reason:
            results[i] = TestResult.not_applicable(test, reason)
        else:
            runnable.append(i)
    if runnable:
        first = lifecycle.bind(contexts[runnable[0]])
        planned = lifecycle.plan(first)
        for i in runnable:
            ctx = replace(first, model=models[i])
            results[i] = (
                planned if isinstance(planned, TestResult) else lifecycle.run_planned(ctx, *planned)
            )
    return [r for r in results if r is not None]


def cell_row(job: Job, spec: ModelSpec, dataset: str, result: TestResult) -> dict[str, Any]:
    """One cell as a row of the cells table."""
    recall = spec.recall
    return {
        "model": spec.model_id if recall is None else spec.name,
        "rest": recall.rest_label if recall is not None else "",
        "dataset": dataset,
        "transform": job.transform,
        "test": result.test,
        "setting": job.setting,
        "seed": job.seed,
        "share": recall.share if recall is not None else "",
        "verdict": str(result.verdict),
        "p_value": result.p_value,
        "n_hits": result.n_hits,
        "n_queries": result.n_queries,
        "baseline": result.baseline,
    }
