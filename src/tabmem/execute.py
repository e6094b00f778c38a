"""The one path of a cell: its plan's data and model loaded once, each test run, and what each
gave handed to a sink. ``tabmem run``, the Python API and the dry run all run cells here: the
runner's ``Recorder`` logs each test as an MLflow run, the dry run's ``Bill`` writes what its
unsent requests would cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from rich.console import Console

from tabmem.errors import ProviderError
from tabmem.jobs import CellPlan, PlannedTest
from tabmem.results import CellResult

if TYPE_CHECKING:
    from tabmem.llm.budget import Budget
    from tabmem.llm.client import LanguageModel
    from tabmem.llm.plan import RequestPlan
    from tabmem.results import TestResult
    from tabmem.tracking.inputs import ShownData


def raise_if_every_query_failed(result: TestResult) -> None:
    """A result built only from failed queries says nothing about the model: fail the cell."""
    errors = [r.error for r in result.records if r.error]
    if result.records and len(errors) == len(result.records):
        raise ProviderError(f"All {len(errors)} queries failed; the first error: {errors[0]}")


@dataclass
class Ran:
    """What one test of a cell gave: its ``result``, or the ``error`` it stopped on; the model
    it ran on (None where the data or the model never loaded), the calls, tokens and dollars
    its queries used, when it ran, and the data as the model was shown it."""

    plan: CellPlan
    test: PlannedTest
    started_ns: int
    ended_ns: int
    result: TestResult | None = None
    error: Exception | None = None
    model: LanguageModel | None = None
    calls: dict[str, float] = field(default_factory=dict)
    data_input: ShownData | None = None


class Sink(Protocol):
    """Where ``execute`` hands what each test of a cell gave: a ``Recorder`` logs a run to
    MLflow; a dry run's ``tabmem.dry_run.Bill`` writes what the unsent requests would cost."""

    console: Console

    def request_plan(self) -> RequestPlan | None:
        """A fresh plan to count the next test's unsent requests in (a dry run), or None to
        send them."""

    def record(self, ran: Ran) -> CellResult | None:
        """One test's outcome, finished (``ran.result``) or failed (``ran.error``)."""


def execute(
    plan: CellPlan,
    sink: Sink,
    budget: Budget | None = None,
    threads: int | None = None,
) -> list[CellResult]:
    """The one path of a cell: load the data and the model once, then run each test of
    ``plan`` and hand its result (or its failure) to ``sink``."""
    from tabmem.battery.base import TestContext, run_test
    from tabmem.data.twin import twin_info
    from tabmem.llm.budget import BudgetReached
    from tabmem.llm.cache import ResponseCache
    from tabmem.llm.registry import build_model
    from tabmem.tracking.inputs import ShownData

    outcomes: list[CellResult | None] = []
    started = time.time_ns()  # each run starts where the previous one ended: the cell's time
    cache = ResponseCache(plan.cache_path)
    model: LanguageModel | None = None
    try:
        try:
            dataset = plan.load_data()
            data_input = ShownData.of(dataset)  # once per cell: every test's run names it
            model = build_model(
                plan.model,
                cache,
                plan.weights_dir,
                # a bar is drawn in a terminal only: piped, it would leave an empty line
                show_progress=plan.progress and sink.console.is_terminal,
                budget=budget,
                plan=sink.request_plan(),
                threads=threads,
                batch_dir=plan.batch_dir,
            )
        except Exception as exc:
            now = time.time_ns()
            outcomes = [
                sink.record(Ran(plan, test, started, now, error=exc)) for test in plan.tests
            ]
            return [o for o in outcomes if o is not None]
        for test in plan.tests:
            before = model.stats.as_dict()
            model.budget_stop = None
            model.answered.clear()
            if model.plan is not None:
                model.plan = sink.request_plan()
            try:
                result = run_test(
                    test.name,
                    TestContext(dataset=dataset, model=model, params=test.settings, seed=plan.seed),
                )
                if model.budget_stop:
                    raise BudgetReached(
                        f"{model.budget_stop}; the answers received are cached, and a re-run "
                        "with a larger budget_usd resumes from them"
                    )
                if model.plan is None:
                    raise_if_every_query_failed(result)
                result.info.update(twin_info(dataset))
            except Exception as exc:
                ended = time.time_ns()
                calls = model.stats.since(before)
                outcomes.append(
                    sink.record(Ran(plan, test, started, ended, None, exc, model, calls))
                )
                started = time.time_ns()
                continue
            ended = time.time_ns()
            calls = model.stats.since(before)
            ran = Ran(plan, test, started, ended, result, None, model, calls, data_input)
            outcomes.append(sink.record(ran))
            started = time.time_ns()
        return [o for o in outcomes if o is not None]
    finally:
        if model is not None:
            model.close()
        cache.close()
