"""Run one grid cell: the tests that finished or that the grid skips kept, the rest checked,
read into the cell's plan and run on the one path (``tabmem.execute``), each result tracked as
an MLflow run by the ``Recorder``.

``dry_run=true`` builds the cell's requests without sending any and without an MLflow run, and
writes what they would cost (``plan-<test>.json``); ``budget_usd`` caps the spend of the grid.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from tabmem.cell import Cell, cell_params, config_hash, group_hash
from tabmem.errors import TabmemError
from tabmem.execute import Ran, execute
from tabmem.jobs import (
    SPEND_LEDGER,
    CellPlan,
    outputs_dir,
    skip_reason,
    test_plan,
)
from tabmem.results import CellResult, figure_text
from tabmem.suites import is_suite
from tabmem.tracking.naming import run_description, run_title
from tabmem.tracking.store import TrackingStore

# The data, the tests, the models and MLflow are imported where a cell first needs them:
# a cell that already finished is skipped without any of them (scripts/bench_startup.py).
if TYPE_CHECKING:
    import pandas as pd
    from mlflow.entities import DatasetInput

    from tabmem.llm.budget import Budget
    from tabmem.llm.client import Answered, LanguageModel
    from tabmem.results import TestResult
    from tabmem.tracking.inputs import ShownData
    from tabmem.tracking.traces import QueryLog

_stores: dict[tuple[str, str, Path | None, Path], TrackingStore] = {}
_stores_lock = threading.Lock()


def open_store(cfg: Any) -> TrackingStore:
    """The store a cell's runs are written to (after the preflight: the slow part starts at
    its first write, when its MLflow client opens)."""
    return _store_of(cfg)


def _store_of(cfg: Any) -> TrackingStore:
    """One ``TrackingStore`` per process and store: the cells a pool worker runs one after
    another share it, so its MLflow client opens once."""
    found = TrackingStore.at(
        outputs_dir(cfg), str(cfg.experiment), cfg.tracking.uri, cfg.tracking.artifact_root
    )
    key = (found.uri, found.experiment, found.artifact_root, found.lock_path)
    with _stores_lock:
        return _stores.setdefault(key, found)


def queries_table(result: TestResult, answered: Sequence[Answered] = ()) -> pd.DataFrame:
    """Every query of a result as rows: prompt, expected, completion, score, error, and a
    reasoning model's thoughts (from the calls in ``answered``) where it had any."""
    import pandas as pd

    from tabmem.tracking.traces import match_answers

    calls = match_answers(result.records, answered)
    thoughts = [c.response.reasoning if c is not None else "" for c in calls]
    return pd.DataFrame(
        [
            {
                "prompt": r.prompt,
                "expected": r.expected,
                "completion": r.completion,
                "score": r.score,
                "error": r.error or "",
                **({"reasoning": thought} if any(thoughts) else {}),
                **{
                    k: json.dumps(v) if isinstance(v, list | dict) else v
                    for k, v in r.extra.items()
                },
            }
            for r, thought in zip(result.records, thoughts, strict=True)
        ]
    )


def headline(result: TestResult) -> str:
    """The figure a summary row shows: hits of queries and, if any, the p-value."""
    return figure_text(result.n_hits, result.n_queries, result.p_value)


def info_tags(result: TestResult) -> dict[str, str]:
    """Scalar ``info`` entries as ``info.<key>`` tags: reports read them without artifacts."""
    scalars = (str, int, float, bool)
    return {
        f"info.{key}": str(value)[:5000]
        for key, value in result.info.items()
        if isinstance(value, scalars)
    }


def close_figures(result: TestResult) -> None:
    """Free the result's matplotlib figures once they are logged."""
    if result.figures:
        import matplotlib.pyplot as plt

        for figure in result.figures.values():
            plt.close(figure)


_watchdog_lock = threading.Lock()
_watched_parent: int | None = None


def in_pool_worker() -> bool:
    """Whether this process is a worker of a joblib (loky) process pool, such as the one Hydra's
    joblib launcher runs a grid's cells in (a worker has loky's executor imported: a process
    without it is none, and need not import joblib to know)."""
    process_executor = sys.modules.get("joblib.externals.loky.process_executor")
    return process_executor is not None and process_executor._CURRENT_DEPTH > 0


def die_with_launcher(poll_s: float = 0.2) -> None:
    """In a pool worker, exit as soon as the launcher that started it is gone (killed by its
    pid, its workers are handed to another parent and would finish and log their cells): a
    daemon thread watches the parent's pid. Started once per worker; a no-op elsewhere."""
    global _watched_parent
    if not in_pool_worker():
        return
    with _watchdog_lock:
        if _watched_parent is not None:
            return
        parent = _watched_parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="tabmem launcher watchdog", daemon=True).start()


def run_cell(
    cfg: Any,
    resolved_yaml: str,
    job_dir: Path,
    console: Console | None = None,
    grid_dir: Path | None = None,
    cells_at_once: int = 1,
    in_grid: bool = False,
) -> list[CellResult]:
    """Run one cell (every test of a suite) end to end; never raises for a cell's own failure.

    The entry point of the cell's one path: its tests that finished already (or that the grid
    skips) are said and kept; the rest are checked (``preflight``), read into the cell's plan
    and run by ``execute``. ``grid_dir`` is the folder of the whole run or sweep, where the
    budget's ledger lives; ``cells_at_once`` how many cells the launcher runs side by side on
    this machine, which share its cores (a local model gets its share as threads).
    ``in_grid``: a cell of a sweep says one line per test (its reason and best query too with
    ``detail=true``).
    """
    die_with_launcher()
    console = console or Console()
    if cfg.get("dry_run"):
        from tabmem.dry_run import plan_cell

        plan_cell(cfg, job_dir, console)
        return []
    suite = str(cfg.test.name) if is_suite(cfg.test) else ""
    brief = in_grid and not cfg.get("detail", False)
    one_line: dict[str, Any] = {"no_wrap": True, "overflow": "ellipsis"} if brief else {}
    pending: list[tuple[str, Any]] = []
    outcomes: list[CellResult] = []
    for name, test_cfg in test_plan(cfg.test):  # finished tests first: no data, model or MLflow
        cell = replace(Cell.from_config(cfg), test=name)
        reason = skip_reason(cfg, name)
        existing = None
        if not (cfg.force or reason):
            existing = finished_run(cfg, config_hash(cell_params({**cfg, "test": test_cfg})))
        if reason:
            outcomes.append(CellResult(**cell.tags(), status="skipped", message=reason))
            console.print(f"[dim]skip[/] {cell.run_name}: {reason}", **one_line)
        elif existing:
            outcomes.append(stored_outcome(cell, existing))
            console.print(
                f"[dim]skip[/] {cell.run_name}: already finished as run {existing.run_id}",
                **one_line,
            )
        else:
            pending.append((name, test_cfg))
    if pending:
        _store_of(cfg).use_writer()  # MLflow opens in a helper while the data and model load
        problem = preflight_error(cfg, pending)
        if problem is not None:  # said now, not after the store and the model: seconds, not 30
            console.print(
                f"[bold red]failed[/] {Cell.from_config(cfg).run_name}: {problem}", **one_line
            )
        recorder = Recorder.of(
            cfg,
            open_store(cfg),
            suite,
            job_dir,
            resolved_yaml,
            Console(quiet=True) if problem is not None else console,
            brief,
        )
        if problem is not None:
            started = time.time_ns()
            for name, test_cfg in pending:
                cell = replace(Cell.from_config(cfg), test=name)
                params = cell_params({**cfg, "test": test_cfg})
                outcomes.append(recorder.failed(cell, params, problem, started))
        else:
            plan = CellPlan.of(cfg, pending)
            budget = grid_budget(cfg, grid_dir or job_dir)
            outcomes += execute(plan, recorder, budget, cpu_share(cells_at_once))
    group = group_hash(cell_params(cfg))
    for outcome in outcomes:
        outcome.seed, outcome.group = int(cfg.seed), group
        outcome.write(job_dir)
    return outcomes


def preflight_error(cfg: Any, tests: Sequence[tuple[str, Any]] | None = None) -> TabmemError | None:
    """What would fail every test of the cell (of ``tests``, its (name, config) pairs that will
    run), found before the tracking store opens and the model is built: the first problem
    ``tabmem.preflight.cell_problems`` finds (the run's and the tests' settings, the data file,
    the model's key and server URL)."""
    from tabmem.preflight import cell_problems

    problems = cell_problems(cfg, tests)
    return problems[0] if problems else None


def finished_run(cfg: Any, config_hash: str) -> CellResult | None:
    """The newest finished run of a cell's configuration in its store, if there is one (a
    SQLite store answers with one read-only query, before MLflow is imported)."""
    return _store_of(cfg).finished(config_hash)


def stored_outcome(cell: Cell, run: CellResult) -> CellResult:
    """A cell skipped because the same configuration already finished: that run's verdict,
    figures and p-value, as the summary and the dataset verdict read them."""
    return replace(
        run,
        **cell.tags(),
        status="skipped",
        message="already finished (force=true runs it again)",
    )


def _cores() -> int:
    """The cores this process may run on."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1


def cpu_share(cells_at_once: int) -> int:
    """This machine's cores divided among the cells that run at once (one at least): two
    local models that each take every core slow each other down."""
    return max(1, _cores() // max(1, cells_at_once))


def cells_at_once(launcher: Any, multirun: bool) -> int:
    """How many cells a Hydra launcher runs side by side on this machine: joblib's ``n_jobs``
    (negative counts back from the cores, as joblib does); one for a single run and for
    launchers that send cells elsewhere (Ray, Slurm)."""
    n_jobs = launcher.get("n_jobs") if multirun else None
    if n_jobs is None:
        return 1
    n_jobs = int(n_jobs)
    return n_jobs if n_jobs > 0 else max(1, _cores() + 1 + n_jobs)


def grid_budget(cfg: Any, grid_dir: Path) -> Budget | None:
    """The grid's spending cap (``budget_usd``), shared through a ledger in the grid's folder."""
    from tabmem.llm.budget import Budget

    limit = cfg.get("budget_usd")
    return None if limit is None else Budget(float(limit), grid_dir / SPEND_LEDGER)


@dataclass(frozen=True)
class Recorder:
    """Where and how a job's cells are recorded: the MLflow store, the suite they ran in (""
    for a single test), the job's folder and resolved config, and the terminal; ``brief``: one
    line a cell (a grid's), ``show_queries``: the best queries under a result, ``traces``: each
    query as an MLflow trace."""

    store: TrackingStore
    suite: str
    job_dir: Path
    resolved_yaml: str
    console: Console
    brief: bool = False
    show_queries: bool = False
    traces: bool = True

    @classmethod
    def of(
        cls,
        cfg: Any,
        store: TrackingStore,
        suite: str,
        job_dir: Path,
        resolved_yaml: str,
        console: Console,
        brief: bool = False,
    ) -> Recorder:
        """A recorder with the run config's terminal and tracing settings (``show_queries``,
        ``tracking.traces``): the one place they are read."""
        return cls(
            store,
            suite,
            job_dir,
            resolved_yaml,
            console,
            brief,
            show_queries=bool(cfg.show_queries),
            traces=bool(cfg.tracking.get("traces", True)),
        )

    def tags(self, cell: Cell, params: dict[str, Any], endpoint: str = "") -> dict[str, str]:
        """The tags every run of a cell carries."""
        tags = {
            **cell.tags(),
            "config_hash": config_hash(params),
            "sweep_dir": str(self.job_dir.parent),
        }
        if self.suite:
            tags["suite"] = self.suite
        if endpoint:
            tags["endpoint"] = endpoint
        return tags

    def request_plan(self) -> None:
        """A recorder's cells send their requests."""
        return None

    def record(self, ran: Ran) -> CellResult:
        """``execute``'s test logged: failed by ``failed``, finished by ``finished`` with every
        query as a trace."""
        from tabmem.tracking.traces import QueryLog

        cell, params = ran.plan.test_cell(ran.test), dict(ran.test.params)
        if ran.error is not None:
            return self.failed(cell, params, ran.error, ran.started_ns, ran.model, ran.calls)
        assert ran.result is not None and ran.model is not None
        window = (ran.started_ns, ran.ended_ns)
        queries = QueryLog(ran.result.records, cell.tags(), window, list(ran.model.answered))
        return self.finished(
            cell,
            params,
            ran.result,
            ran.calls,
            queries,
            ran.model.endpoint,
            data_input=ran.data_input,
        )

    def failed(
        self,
        cell: Cell,
        params: dict[str, Any],
        exc: Exception,
        started_ns: int,
        model: LanguageModel | None = None,
        calls: dict[str, float] | None = None,
    ) -> CellResult:
        """A failed cell: logged as a FAILED run with its error (and the tokens and dollars its
        queries used before it failed); one sentence on the terminal (one line when ``brief``:
        the summary at the end says it whole)."""
        message = str(exc) if isinstance(exc, TabmemError) else f"{type(exc).__name__}: {exc}"
        texts = {"config.yaml": self.resolved_yaml}
        if not isinstance(exc, TabmemError):
            texts["traceback.txt"] = "".join(traceback.format_exception(exc))
        endpoint = model.endpoint if model is not None else ""
        tags = {
            **self.tags(cell, params, endpoint),
            "verdict": "failed",
            "error": message[:5000],
        }
        run_id = self.store.log_cell(
            run_title(cell, "failed"),
            tags,
            params,
            calls or {},
            {},
            texts,
            failed=True,
            start_ms=started_ns // 1_000_000,
            description=run_description("failed", message),
        )
        self.console.print(
            f"[bold red]failed[/] {cell.run_name}: {message}",
            no_wrap=self.brief,
            overflow="ellipsis" if self.brief else None,
        )
        outcome = CellResult(**cell.tags(), status="failed", run_id=run_id, message=message)
        outcome.add_calls(calls or {})
        return outcome

    def finished(
        self,
        cell: Cell,
        params: dict[str, Any],
        result: TestResult,
        calls: dict[str, float],
        queries: QueryLog,
        endpoint: str = "",
        extra_tags: dict[str, str] | None = None,
        data_input: DatasetInput | ShownData | None = None,
    ) -> CellResult:
        """A finished cell: verdict, figures, every query and the config, as one FINISHED run
        (``extra_tags`` mark where its answers came from, such as a transcript; ``data_input``,
        the data as the model was shown it (``tracking.inputs``), the run's dataset input)."""
        import yaml

        from tabmem.report.terminal import show_brief, show_result

        if self.brief:
            show_brief(result, cell.run_name, headline(result), self.console)
        else:
            self.console.print(f"[bold]{cell.run_name}[/]")
            show_result(result, self.console, verbose=self.show_queries)
        metrics = {**result.all_metrics(), **calls}
        summary = {
            "verdict": result.verdict.value,
            "reason": result.reason,
            "metrics": metrics,
            "info": result.info,
        }
        tags = {
            **self.tags(cell, params, endpoint),
            **info_tags(result),
            **(extra_tags or {}),
            "verdict": result.verdict.value,
            "reason": result.reason[:5000],
        }
        artifacts = (
            {"queries.json": queries_table(result, queries.answered)} if result.records else {}
        )
        run_id = self.store.log_cell(
            run_title(cell, result.verdict.value),
            tags,
            params,
            metrics,
            {**artifacts, **result.tables},
            {
                "config.yaml": self.resolved_yaml,
                "result.yaml": yaml.safe_dump(summary, sort_keys=False, allow_unicode=True),
            },
            failed=False,
            figures=result.figures,
            start_ms=queries.window_ns[0] // 1_000_000,
            description=run_description(result.verdict.value, result.reason, headline(result)),
            queries=queries if self.traces else None,
            dataset=data_input,
        )
        close_figures(result)
        outcome = CellResult(
            **cell.tags(),
            status="finished",
            verdict=result.verdict.value,
            figure=headline(result),
            run_id=run_id,
            p_value=result.p_value,
            reason=result.reason,
            n_queries=result.n_queries,
            n_hits=result.n_hits,
            rate=result.rate,
            baseline=result.baseline,
            metrics=metrics,
            tracking_uri=self.store.uri,
        )
        outcome.add_calls(calls)
        return outcome
