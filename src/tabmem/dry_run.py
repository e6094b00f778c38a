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
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from tabmem.battery.base import TestContext, run_test
from tabmem.cell import Cell
from tabmem.data import load_dataset
from tabmem.data.transforms import apply_transform
from tabmem.errors import TabmemError
from tabmem.jobs import batch_dir, outputs_dir, skip_reason, test_plan
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.plan import RequestPlan
from tabmem.llm.registry import build_model
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
    write per test what the unsent requests would cost (``plan-<test>.json``)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    problems = cell_problems(cfg, credentials=False)
    if problems:  # the real run would stop here too: nothing to plan
        _cannot_plan(cfg, job_dir, console, str(problems[0]))
        return
    # a real run would stop for these, but nothing is sent: the bill is still complete (its
    # rows keep what is missing, as ``needs``; the sentences, with what to do, come before it)
    needs = [v for p in credentials_problems(cfg) for v in re.findall(r"\$\w+", str(p))]
    cache = ResponseCache(outputs_dir(cfg) / "cache" / "responses.sqlite")
    model: LanguageModel | None = None
    try:
        dataset = apply_transform(load_dataset(cfg.dataset), cfg.transform, int(cfg.seed))
        model = build_model(
            cfg.model,
            cache,
            outputs_dir(cfg) / "weights",
            show_progress=False,
            plan=RequestPlan(),
            batch_dir=batch_dir(cfg),
        )
        for name, test_cfg in test_plan(cfg.test):
            cell = replace(Cell.from_config(cfg), test=name)
            model.plan = RequestPlan()
            note = skip_reason(cfg, name)
            if not note:
                try:
                    result = run_test(
                        name,
                        TestContext(
                            dataset=dataset, model=model, params=test_cfg, seed=int(cfg.seed)
                        ),
                    )
                except Exception as exc:
                    note = f"the test stopped on unsent answers: {type(exc).__name__}: {exc}"
                else:
                    note = not_applicable_note(result, model.plan)
            row = {**cell.tags(), **model.plan.as_dict(model.price), "note": note[:300]}
            row["needs"] = needs
            (job_dir / f"plan-{name}.json").write_text(json.dumps(row, indent=2))
            console.print(f"[dim]planned[/] {cell.run_name}: {model.plan.requests} requests")
    except Exception as exc:
        message = str(exc) if isinstance(exc, TabmemError) else f"{type(exc).__name__}: {exc}"
        _cannot_plan(cfg, job_dir, console, message)
    finally:
        if model is not None:
            model.close()
        cache.close()


def _cannot_plan(cfg: Any, job_dir: Path, console: Console, message: str) -> None:
    """A cell that cannot be planned: one sentence, and its row in the bill says why."""
    console.print(f"[bold red]cannot plan[/] {Cell.from_config(cfg).run_name}: {message}")
    row = {**Cell.from_config(cfg).tags(), "requests": None, "note": message[:300]}
    (job_dir / f"plan-{cfg.test.name}.json").write_text(json.dumps(row, indent=2))
