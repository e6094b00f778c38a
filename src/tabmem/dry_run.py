"""A dry run of one cell (``dry_run=true``): every request built, none sent, the bill written.

The cell's tests run unchanged against a model that answers only from the cache and counts
every other request (``tabmem.llm.plan``); no MLflow store is opened and nothing is cached.
Each test writes ``plan-<test>.json`` into the job folder; the end-of-run summary gathers them
into one table (``tabmem.report.summary.print_plan``), whose note says why a test that cannot
run on the cell (``not_applicable``) would send nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from tabmem.cell import Cell
from tabmem.errors import TabmemError
from tabmem.execute import Ran, execute
from tabmem.jobs import CellPlan, PlannedTest, skip_reason, test_plan
from tabmem.llm.plan import RequestPlan
from tabmem.preflight import cell_problems, credentials_problems
from tabmem.results import TestResult, Verdict


def not_applicable_note(result: TestResult, plan: RequestPlan) -> str:
    """The note of a test that would send nothing because it cannot run on the cell (a model
    without log-probabilities, a file too small): its reason, so the bill says why a cell
    costs nothing. A test that would send requests is judged on unsent answers: no note."""
    if result.verdict != Verdict.NOT_APPLICABLE or plan.requests:
        return ""
    return f"not_applicable: {result.reason}"


def plan_cell(cfg: Any, job_dir: Path, console: Console) -> None:
    """A dry run of one cell: build every test's requests, send none, log nothing to MLflow;
    write per test what the unsent requests would cost (``plan-<test>.json``). The cell runs
    the one path, ``tabmem.execute.execute``, with a model that counts instead of sending."""
    job_dir.mkdir(parents=True, exist_ok=True)
    problems = cell_problems(cfg, credentials=False)
    if problems:  # the real run would stop here too: nothing to plan
        _cannot_plan(Cell.from_config(cfg), job_dir, console, str(problems[0]))
        return
    # a real run would stop for these, but nothing is sent: the bill is still complete (its
    # rows keep what is missing, as ``needs``; the sentences, with what to do, come before it)
    needs = [v for p in credentials_problems(cfg) for v in re.findall(r"\$\w+", str(p))]
    tests = test_plan(cfg.test)
    skipped = {name: skip_reason(cfg, name) for name, _ in tests}
    plan = replace(CellPlan.of(cfg, tests), progress=False)
    bill = Bill(job_dir, console, needs)
    for test in plan.tests:
        if skipped[test.name]:
            bill.write(plan, test, RequestPlan().as_dict(bill.price(plan)), skipped[test.name])
    runs = replace(plan, tests=tuple(t for t in plan.tests if not skipped[t.name]))
    execute(runs, bill)


@dataclass
class Bill:
    """A dry run's sink for ``execute``: each test's unsent requests counted in a fresh
    ``RequestPlan`` and written, with their price, as ``plan-<test>.json``; a cell whose data
    or model cannot load gets one row that says why."""

    job_dir: Path
    console: Console
    needs: list[str]
    _said: bool = field(default=False, repr=False)

    def request_plan(self) -> RequestPlan:
        return RequestPlan()

    @staticmethod
    def price(plan: CellPlan) -> Any:
        from tabmem.llm.pricing import model_price

        return model_price(plan.model, batch=plan.batch)

    def write(self, plan: CellPlan, test: PlannedTest, counts: dict[str, Any], note: str) -> None:
        cell = plan.test_cell(test)
        row = {**cell.tags(), **counts, "note": note[:300], "needs": self.needs}
        (self.job_dir / f"plan-{test.name}.json").write_text(json.dumps(row, indent=2))
        self.console.print(f"[dim]planned[/] {cell.run_name}: {counts['requests']} requests")

    def record(self, ran: Ran) -> None:
        """A test's row of the bill: its unsent requests, and why where it would send none;
        a cell whose data or model did not load, one row that says why."""
        model = ran.model
        if model is None:
            if not self._said and ran.error is not None:
                self._said = True
                _cannot_plan(ran.plan.cell, self.job_dir, self.console, _sentence(ran.error))
            return
        requests = model.plan
        assert requests is not None
        if ran.result is None:
            note = f"the test stopped on unsent answers: {type(ran.error).__name__}: {ran.error}"
        else:
            note = not_applicable_note(ran.result, requests)
        self.write(ran.plan, ran.test, requests.as_dict(model.price), note)


def _cannot_plan(cell: Cell, job_dir: Path, console: Console, message: str) -> None:
    """A cell that cannot be planned: one sentence, and its row in the bill says why."""
    console.print(f"[bold red]cannot plan[/] {cell.run_name}: {message}")
    row = {**cell.tags(), "requests": None, "note": message[:300]}
    (job_dir / f"plan-{cell.test}.json").write_text(json.dumps(row, indent=2))


def _sentence(exc: Exception) -> str:
    """An error as the bill says it: ours as written, any other with its type."""
    return str(exc) if isinstance(exc, TabmemError) else f"{type(exc).__name__}: {exc}"
