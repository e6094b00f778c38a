"""Run one grid cell: its config read once into a job (``tabmem.intake``: the tests that
finished or that the grid skips kept, the rest checked and planned), the job run on the one path
(``tabmem.execute``), each result tracked as an MLflow run by the ``Recorder``.

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

from tabmem.cell import Cell, config_hash
from tabmem.errors import TabmemError
from tabmem.execute import Ran, execute
from tabmem.intake import CellJob, read_cell
from tabmem.results import CellResult, figure_text
from tabmem.tracking.naming import run_description, run_title
from tabmem.tracking.store import TrackingStore

# The data, the tests, the models and MLflow are imported where a cell first needs them:
# a cell that already finished is skipped without any of them (scripts/bench_startup.py).
if TYPE_CHECKING:
    import pandas as pd
    from mlflow.entities import DatasetInput

    from tabmem.llm.client import Answered, LanguageModel
    from tabmem.results import TestResult
    from tabmem.tracking.inputs import ShownData
    from tabmem.tracking.traces import QueryLog


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

    The entry point of the cell's one path: its config is read once (``tabmem.intake``), then
    the job runs (``run_job``). ``grid_dir`` is the folder of the whole run or sweep, where
    the budget's ledger lives; ``cells_at_once`` how many cells the launcher runs side by side
    on this machine, which share its cores (a local model gets its share as threads).
    ``in_grid``: a cell of a sweep says one line per test (its reason and best query too with
    ``detail=true``).
    """
    die_with_launcher()
    console = console or Console()
    job = read_cell(cfg, grid_dir or job_dir)
    if cfg.get("dry_run"):
        from tabmem.dry_run import plan_cell

        plan_cell(job, job_dir, console)
        return []
    brief = in_grid and not cfg.get("detail", False)
    return run_job(job, resolved_yaml, job_dir, console, brief, cpu_share(cells_at_once))


def run_job(
    job: CellJob, resolved_yaml: str, job_dir: Path, console: Console, brief: bool, threads: int
) -> list[CellResult]:
    """A cell's job: its kept tests said, the others run by ``execute`` (or, where the
    preflight found what stops them all, each recorded as failed with it), every outcome
    written into ``job_dir`` for the summary. ``brief``: one line a test; ``threads``: the
    cores a local model may take."""
    one_line: dict[str, Any] = {"no_wrap": True, "overflow": "ellipsis"} if brief else {}
    for kept in job.kept:
        console.print(kept.line, **one_line)
    outcomes = [kept.outcome for kept in job.kept]
    if job.pending:
        if job.problem is not None:  # said now, before the store's first write
            console.print(f"[bold red]failed[/] {job.cell.run_name}: {job.problem}", **one_line)
        recorder = Recorder(
            job.store,
            job.suite,
            job_dir,
            resolved_yaml,
            Console(quiet=True) if job.problem is not None else console,
            brief,
            job.show_queries,
            job.traces,
        )
        if job.plan is None:
            assert job.problem is not None
            started = time.time_ns()
            for test in job.pending:
                cell = replace(job.cell, test=test.name)
                outcomes.append(recorder.failed(cell, dict(test.params), job.problem, started))
        else:
            outcomes += execute(job.plan, recorder, job.budget, threads)
    for outcome in outcomes:
        outcome.seed, outcome.group = job.seed, job.group
        outcome.write(job_dir)
    return outcomes


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
