"""A cell's config read once, before anything runs: ``tabmem run`` and the Python API hand
Hydra's composed config to ``read_cell`` and get a typed ``CellJob``; what runs the cell
(``tabmem.runner.run_job``, then ``tabmem.execute``) never reads the config.

The cell's tests that a grid skips or that finished already are kept as they are (no data,
model or MLflow for them: a SQLite store answers with one read-only query); the others are
checked (``tabmem.preflight``) and, where nothing stops them, read into their plan.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabmem.cell import Cell, cell_params, config_hash, group_hash
from tabmem.errors import TabmemError
from tabmem.jobs import SPEND_LEDGER, CellPlan, PlannedTest, outputs_dir, skip_reason, test_plan
from tabmem.results import CellResult
from tabmem.suites import is_suite
from tabmem.tracking.store import TrackingStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tabmem.llm.budget import Budget


@dataclass(frozen=True)
class KeptTest:
    """A test of the cell that does not run: its outcome (skipped by the grid, or the finished
    run of the same configuration) and the line the terminal says for it."""

    outcome: CellResult
    line: str


@dataclass(frozen=True)
class CellJob:
    """One cell as read from its config: the tests kept without running, the tests to run
    (``pending``) with what would stop them all (``problem``, the preflight's first) or else
    their ``plan``, the store their runs go to, the grid's spending cap, and how the runs are
    recorded (``show_queries``: the best queries under a result; ``traces``: each query as an
    MLflow trace). ``suite`` is the suite's name ("" for a single test); ``seed`` and
    ``group`` are what each outcome carries for the dataset verdict. A dry run's job has no
    store, and ``needs`` the environment variables its model would send with."""

    cell: Cell
    suite: str
    seed: int
    group: str
    store: TrackingStore | None
    kept: tuple[KeptTest, ...] = ()
    pending: tuple[PlannedTest, ...] = ()
    problem: TabmemError | None = None
    plan: CellPlan | None = None
    budget: Budget | None = None
    show_queries: bool = False
    traces: bool = True
    needs: tuple[str, ...] = ()


def read_cell(cfg: Any, grid_dir: Path) -> CellJob:
    """The job of the composed cell ``cfg``; ``grid_dir`` is the folder of the whole run or
    sweep, where the budget's ledger lives. Where a test is left to run, the store's MLflow
    starts opening in a helper now, while the preflight reads the data. A dry run's job
    (``dry_run=true``) has no store: every test not skipped is planned, and a missing key or
    server URL is one of its ``needs`` rather than its problem (nothing is sent)."""
    if cfg.get("dry_run"):
        return _dry_job(cfg)
    cell = Cell.from_config(cfg)
    store = store_of(cfg)
    kept: list[KeptTest] = []
    pending: list[tuple[str, Any]] = []
    for name, test_cfg in test_plan(cfg.test):  # finished tests first: no data, model or MLflow
        test_cell = replace(cell, test=name)
        reason = skip_reason(cfg, name)
        existing = None
        if not (cfg.force or reason):
            existing = store.finished(config_hash(cell_params({**cfg, "test": test_cfg})))
        if reason:
            kept.append(_skipped(test_cell, reason))
        elif existing:
            finished = replace(
                existing,
                **test_cell.tags(),
                status="skipped",
                message="already finished (force=true runs it again)",
            )
            said = f"already finished as run {existing.run_id}"
            kept.append(KeptTest(finished, f"[dim]skip[/] {test_cell.run_name}: {said}"))
        else:
            pending.append((name, test_cfg))
    job = _job(cfg, cell, store, kept)
    if not pending:
        return job
    store.use_writer()  # MLflow opens in a helper while the data and model load
    problem = preflight_error(cfg, pending)
    if problem is not None:  # said before the store and the model: seconds, not 30
        tests = tuple(PlannedTest.of(cfg, name, test_cfg) for name, test_cfg in pending)
        return replace(job, pending=tests, problem=problem)
    plan = CellPlan.of(cfg, pending)
    return replace(job, pending=plan.tests, plan=plan, budget=grid_budget(cfg, grid_dir))


def _dry_job(cfg: Any) -> CellJob:
    """A dry run's job: the tests a grid skips kept, every other one planned, without progress
    bars; a problem that would stop the real run before it sends anything stops the plan too."""
    import re

    from tabmem.preflight import cell_problems, credentials_problems

    cell = Cell.from_config(cfg)
    try:
        tests: list[tuple[str, Any]] | None = test_plan(cfg.test)
    except TabmemError:  # a suite member that does not exist: the preflight says it
        tests = None
    skipped = {name: skip_reason(cfg, name) for name, _ in tests or ()}
    planned = [(name, test_cfg) for name, test_cfg in tests or () if not skipped[name]]
    problems = cell_problems(cfg, None if tests is None else planned, credentials=False)
    if problems:  # the real run would stop here too: nothing to plan
        return replace(_job(cfg, cell, None, []), problem=problems[0])
    # a real run would stop for these, but nothing is sent: the bill is still complete (its
    # rows keep what is missing, as ``needs``; the sentences, with what to do, come before it)
    needs = [v for p in credentials_problems(cfg) for v in re.findall(r"\$\w+", str(p))]
    kept = [_skipped(replace(cell, test=n), reason) for n, reason in skipped.items() if reason]
    plan = replace(CellPlan.of(cfg, planned), progress=False)
    return replace(_job(cfg, cell, None, kept), pending=plan.tests, plan=plan, needs=tuple(needs))


def _job(cfg: Any, cell: Cell, store: TrackingStore | None, kept: Sequence[KeptTest]) -> CellJob:
    """The job's parts that every cell has, whatever it runs (a seed that is no whole number
    is the preflight's problem to say; the job then carries 0, a record's default)."""
    seed = cfg.seed
    return CellJob(
        cell=cell,
        suite=str(cfg.test.name) if is_suite(cfg.test) else "",
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else 0,
        group=group_hash(cell_params(cfg)),
        store=store,
        kept=tuple(kept),
        **recording(cfg),
    )


def _skipped(cell: Cell, reason: str) -> KeptTest:
    """A test the grid skips (``skip_unrunnable``), with its reason."""
    outcome = CellResult(**cell.tags(), status="skipped", message=reason)
    return KeptTest(outcome, f"[dim]skip[/] {cell.run_name}: {reason}")


def preflight_error(cfg: Any, tests: Sequence[tuple[str, Any]] | None = None) -> TabmemError | None:
    """What would fail every test of the cell (of ``tests``, its (name, config) pairs that will
    run), found before the tracking store opens and the model is built: the first problem
    ``tabmem.preflight.cell_problems`` finds (the run's and the tests' settings, the data file,
    the model's key and server URL)."""
    from tabmem.preflight import cell_problems

    problems = cell_problems(cfg, tests)
    return problems[0] if problems else None


def grid_budget(cfg: Any, grid_dir: Path) -> Budget | None:
    """The grid's spending cap (``budget_usd``), shared through a ledger in the grid's folder."""
    from tabmem.llm.budget import Budget

    limit = cfg.get("budget_usd")
    return None if limit is None else Budget(float(limit), grid_dir / SPEND_LEDGER)


def recording(cfg: Any) -> dict[str, bool]:
    """How a run config's cells are recorded: ``show_queries`` and ``traces``, as a
    ``tabmem.runner.Recorder`` takes them (rescoring records its files so too)."""
    return {
        "show_queries": bool(cfg.show_queries),
        "traces": bool(cfg.tracking.get("traces", True)),
    }


_stores: dict[tuple[str, str, Path | None, Path], TrackingStore] = {}
_stores_lock = threading.Lock()


def store_of(cfg: Any) -> TrackingStore:
    """The store a config's runs go to, one per process and store: the cells a pool worker
    runs one after another share it, so its MLflow client opens once."""
    found = TrackingStore.at(
        outputs_dir(cfg), str(cfg.experiment), cfg.tracking.uri, cfg.tracking.artifact_root
    )
    key = (found.uri, found.experiment, found.artifact_root, found.lock_path)
    with _stores_lock:
        return _stores.setdefault(key, found)
