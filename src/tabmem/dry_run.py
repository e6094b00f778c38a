"""A dry run of one cell (``dry_run=true``): every request built, none sent, the bill written.

The cell's tests run unchanged against a model that answers only from the cache and counts
every other request (``tabmem.llm.plan``); no MLflow store is opened and nothing is cached.
Each test writes ``plan-<test>.json`` into the job folder; the end-of-run summary gathers them
into one table (``tabmem.report.summary.print_plan``), whose note says why a test that cannot
run on the cell (``not_applicable``) would send nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from tabmem.cell import Cell
from tabmem.errors import TabmemError
from tabmem.execute import Ran, execute
from tabmem.intake import CellJob
from tabmem.jobs import CellPlan
from tabmem.llm.plan import RequestPlan
from tabmem.results import TestResult, Verdict


def not_applicable_note(result: TestResult, plan: RequestPlan) -> str:
    """The note of a test that would send nothing because it cannot run on the cell (a model
    without log-probabilities, a file too small): its reason, so the bill says why a cell
    costs nothing. A test that would send requests is judged on unsent answers: no note."""
    if result.verdict != Verdict.NOT_APPLICABLE or plan.requests:
        return ""
    return f"not_applicable: {result.reason}"


def plan_cell(job: CellJob, job_dir: Path, console: Console) -> None:
    """A dry run of one cell (its job as ``tabmem.intake.read_cell`` reads a dry run): build
    every test's requests, send none, log nothing to MLflow; write per test what the unsent
    requests would cost (``plan-<test>.json``). The cell runs the one path,
    ``tabmem.execute.execute``, with a model that counts instead of sending."""
    job_dir.mkdir(parents=True, exist_ok=True)
    if job.plan is None:  # the real run would stop here too: nothing to plan
        _cannot_plan(job.cell, job_dir, console, str(job.problem))
        return
    bill = Bill(job_dir, console, list(job.needs))
    unsent = RequestPlan().as_dict(bill.price(job.plan))
    for kept in job.kept:  # a test the grid skips: no request, and why
        bill.write(replace(job.cell, test=kept.outcome.test), unsent, kept.outcome.message)
    execute(job.plan, bill)


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

    def write(self, cell: Cell, counts: dict[str, Any], note: str) -> None:
        row = {**cell.tags(), **counts, "note": note[:300], "needs": self.needs}
        (self.job_dir / f"plan-{cell.test}.json").write_text(json.dumps(row, indent=2))
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
        self.write(ran.plan.test_cell(ran.test), requests.as_dict(model.price), note)


def _cannot_plan(cell: Cell, job_dir: Path, console: Console, message: str) -> None:
    """A cell that cannot be planned: one sentence, and its row in the bill says why."""
    console.print(f"[bold red]cannot plan[/] {cell.run_name}: {message}")
    row = {**cell.tags(), "requests": None, "note": message[:300]}
    (job_dir / f"plan-{cell.test}.json").write_text(json.dumps(row, indent=2))


def _sentence(exc: Exception) -> str:
    """An error as the bill says it: ours as written, any other with its type."""
    return str(exc) if isinstance(exc, TabmemError) else f"{type(exc).__name__}: {exc}"
