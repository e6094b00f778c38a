"""The in-process calibration run: plan the jobs of a size, run them on a process pool with a
progress bar, write the cells, the dataset verdicts, ``reference_fpr.md``,
``reference_power.md`` and ``reference_power.png``, and print the FPR table and the time.

Configs are composed once in the parent (Hydra's compose API, as ``python run.py`` would
compose them) and handed to the workers, which load each dataset and twin and build each
oracle once per process.
"""

from __future__ import annotations

import csv
import math
import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import cache
from itertools import groupby, product
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from tabmem.api import compose_config
from tabmem.battery.base import needs_of
from tabmem.calibrate.cells import (
    BASELINE_SHARED,
    NEGATIVE_ORACLES,
    TWIN_MODEL,
    Job,
    ModelSpec,
    OracleObjectBackend,
    World,
    rows_seen_tests,
    run_job,
)
from tabmem.calibrate.tables import (
    DATASET_VERDICT,
    FPR_HEADER,
    VERDICT_KEY,
    breakdown_markdown,
    dataset_verdicts,
    file_power_markdown,
    fpr_rows,
    fpr_table,
    power_figure,
    power_markdown,
    power_rows,
    role,
)
from tabmem.jobs import test_plan
from tabmem.llm.base import capabilities_of
from tabmem.llm.oracle import ORACLES
from tabmem.llm.oracle.partial import RESTS, Recall
from tabmem.markdown import markdown_table
from tabmem.results import Verdict


@cache
def paper_files() -> tuple[str, ...]:
    """The six paper files: the datasets the power grid sweeps (``conf/grid/power.yaml``,
    where they are declared once)."""
    from tabmem.paths import conf_dir

    grid = OmegaConf.load(conf_dir() / "grid" / "power.yaml")
    return tuple(name.strip() for name in str(grid.hydra.sweeper.params.dataset).split(","))


SETTINGS = {"default": "test=calibration", "papers": "test=calibration_papers"}
"""The query settings and the suite whose members' configs give each test's counts; a test
the papers' suite leaves out is asked at its default counts there."""
SHARES = (0.02, 0.05, 0.1, 0.2, 0.4)
BOUNDARY_SHARES = (0.05, 0.1)
"""The shares where the dataset verdict's power crosses 0.8 on some file: run on more seeds."""
CELL_FIELDS = (
    "model",
    "rest",
    "dataset",
    "transform",
    "test",
    "setting",
    "seed",
    "share",
    "verdict",
    "p_value",
    "n_hits",
    "n_queries",
    "baseline",
)
VERDICT_FIELDS = (
    "test",
    "model",
    "rest",
    "dataset",
    "transform",
    "setting",
    "seed",
    "share",
    "verdict",
    "p_value",
    "tests",
    "combined",
    "carried_by",
)


@dataclass(frozen=True)
class Size:
    """How much to run: files, seeds of the negatives and of the power grid (counted from
    ``first_seed``, so that runs on several machines or at several times add up), shares,
    rests, query settings, the tests (empty: every test of rows seen) and the negative models
    (empty: every catalog oracle that knows no row)."""

    datasets: tuple[str, ...] = field(default_factory=paper_files)
    negative_seeds: int = 14
    power_seeds: int = 20
    first_seed: int = 0
    shares: tuple[float, ...] = SHARES
    rests: tuple[str, ...] = tuple(RESTS)
    boundary: tuple[float, ...] = ()
    """Shares where power is read at its edge, run on ``boundary_seeds`` seeds instead."""
    boundary_seeds: int = 0
    settings: tuple[str, ...] = tuple(SETTINGS)
    tests: tuple[str, ...] = ()
    negatives: tuple[str, ...] = ()


SIZES = {
    "smoke": Size(
        datasets=("iris",),
        negative_seeds=1,
        power_seeds=1,
        shares=(0.4,),
        rests=("learner",),
        tests=("header", "row_completion"),
        negatives=("oracle-null", "oracle-learner"),
    ),
    "negatives": Size(power_seeds=0),
    "power": Size(
        negative_seeds=0,
        rests=("forest-quiet",),
        boundary=BOUNDARY_SHARES,
        boundary_seeds=50,
    ),
}
"""``smoke``: seconds, for the test suite. ``negatives``: the false-positive tables, 14 seeds
of the ten negatives (nine oracles on the real files, the adversary panel among them; the
memorizer on twins) on the six paper files, 840 cells per test and setting, and further seeds
for a test until 840 of its cells
are applicable. ``power``: the power tables, 20 seeds of the partial memorizer per share
(50 at the boundary shares 0.05 and 0.1) with the forest learner as its rest, quiet (it
volunteers no known row: the realistic positive); ``--rests forest,learner,chance`` adds the
others. Each table says how long its run took."""


@dataclass
class Outcome:
    """What a run produced: the cells, the dataset verdicts, the tables' rows, the time."""

    cells: list[dict[str, Any]]
    verdicts: list[dict[str, Any]]
    fpr: list[dict[str, Any]]
    power: list[dict[str, Any]]
    seconds: float
    workers: int
    jobs: tuple[int, int] = (0, 0)  # jobs run, jobs planned
    files: list[Path] = field(default_factory=list)


def plain(config: Any) -> Any:
    """A composed config node as plain Python values (picklable for the workers)."""
    return OmegaConf.to_container(config, resolve=True)


def compose_world(size: Size) -> World:
    """Every config a run needs, composed once: each test's settings per setting, the files',
    the transforms', and the reference models' prompt form and context window (one for all:
    the plan of a test is shared between its models)."""
    tests = size.tests or rows_seen_tests()
    default = dict(test_plan(compose_config([SETTINGS["default"]]).test))
    settings = {}
    for setting in size.settings:
        suite = dict(test_plan(compose_config([SETTINGS[setting]]).test))
        settings[setting] = {t: plain(suite.get(t, default[t])) for t in tests}
    datasets = {d: plain(compose_config([f"dataset={d}"]).dataset) for d in size.datasets}
    transforms = {
        t: plain(compose_config([f"transform={t}"]).transform) for t in ("original", "twin")
    }
    forms = set()
    for name in (*negatives(size), TWIN_MODEL, "oracle-partial"):
        model = compose_config([f"model={ModelSpec.of(name).name}"]).model
        forms.add((str(model.get("prompt_form", "chat")), int(model.get("context_window", 4096))))
    if len(forms) != 1:
        raise ValueError(f"the reference models differ in prompt form or context window: {forms}")
    return World(settings, datasets, transforms, forms.pop())


def negatives(size: Size) -> tuple[str, ...]:
    """The size's reference models that know no row (model names, a panel family's with its
    spread): its own list, else every one the catalog holds."""
    return size.negatives or tuple(
        name for name in NEGATIVE_ORACLES if ModelSpec.of(name).name in ORACLES
    )


def asked_at(size: Size, settings: dict[str, dict[str, Any]], setting: str) -> tuple[str, ...]:
    """The tests run at ``setting``: every one at the first setting, and at another only those
    whose config differs there from the first's (the others are counted at both)."""
    tests = tuple(size.tests or rows_seen_tests())
    first = size.settings[0]
    return (
        tests
        if setting == first
        else tuple(t for t in tests if settings[setting][t] != settings[first][t])
    )


def counted_also(size: Size, setting: str) -> tuple[str, ...]:
    """The settings a job at ``setting`` is counted at besides its own (``Job.also``): the
    others for the first setting, none for the rest."""
    return tuple(s for s in size.settings if s != setting) if setting == size.settings[0] else ()


def plan_jobs(size: Size, settings: dict[str, dict[str, Any]]) -> list[Job]:
    """The jobs of a size, longest first. A test whose config is the same at two settings is
    run once, at the first, and counted at both (``Job.also``)."""
    jobs = []
    for setting in size.settings:
        own, also = asked_at(size, settings, setting), counted_also(size, setting)
        for dataset in size.datasets:
            most = max(size.negative_seeds, size.power_seeds, size.boundary_seeds)
            for nth in range(most):
                seed = size.first_seed + nth
                models: list[ModelSpec] = []
                if nth < size.negative_seeds:
                    models += [ModelSpec.of(name) for name in negatives(size)]
                models += [
                    ModelSpec("oracle-partial", Recall.of_rest(share, seed, rest))
                    for rest in size.rests
                    for share in size.shares
                    if nth < power_seeds(size, share)
                ]
                if models and own:
                    jobs.append(Job(dataset, "original", seed, setting, tuple(models), own, also))
                if nth < size.negative_seeds and own:
                    twin = (ModelSpec(TWIN_MODEL),)
                    jobs.append(Job(dataset, "twin", seed, setting, twin, own, also))
    return jobs


def power_seeds(size: Size, share: float) -> int:
    """The seeds a share runs on: ``boundary_seeds`` at a boundary share, else
    ``power_seeds`` (none where power is not run)."""
    if not size.power_seeds:
        return 0
    return size.boundary_seeds if share in size.boundary else size.power_seeds


def top_up_jobs(
    size: Size,
    settings: dict[str, dict[str, Any]],
    cells: Sequence[dict[str, Any]],
    order: Sequence[str],
) -> list[Job]:
    """Jobs that replace the negatives' ``not_applicable`` cells with applicable ones: for each
    test and setting with fewer applicable negative cells than the size plans per test, the
    same models on the seeds after the last one run, on the files and transforms where the
    test applied (``order``: the files, smallest first), until the cells these ran show it
    should have as many. A test asked at the first setting's counts is topped up there and
    counted at both, as ``plan_jobs`` does."""
    wanted = size.negative_seeds * len(size.datasets) * (len(negatives(size)) + 1)
    runs: dict[tuple[str, str, int, str], list[str]] = {}
    for setting in size.settings:
        for test in asked_at(size, settings, setting):
            mine = [
                r
                for r in cells
                if r["test"] == test and r["setting"] == setting and role(r) == "negative"
            ]
            yields: dict[tuple[str, str], float] = {}  # applicable cells a seed gave
            for dataset, transform in product(order, ("original", "twin")):
                here = [r for r in mine if (r["dataset"], r["transform"]) == (dataset, transform)]
                seeds = {r["seed"] for r in here}
                applicable = sum(r["verdict"] != Verdict.NOT_APPLICABLE for r in here)
                if applicable:
                    yields[dataset, transform] = applicable / len(seeds)
            short = wanted - sum(r["verdict"] != Verdict.NOT_APPLICABLE for r in mine)
            seed = max((r["seed"] for r in mine), default=size.first_seed) + 1
            while short > 0 and yields:
                for (dataset, transform), expected in yields.items():
                    if short <= 0:
                        break
                    runs.setdefault((dataset, transform, seed, setting), []).append(test)
                    short -= expected
                seed += 1
    return [
        Job(
            dataset,
            transform,
            seed,
            setting,
            tuple(ModelSpec.of(n) for n in negatives(size))
            if transform == "original"
            else (ModelSpec(TWIN_MODEL),),
            tuple(asked),
            counted_also(size, setting),
        )
        for (dataset, transform, seed, setting), asked in runs.items()
    ]


_WORLD: World | None = None


def _start_worker(world: World) -> None:
    global _WORLD
    _WORLD = world


def _work(unit: tuple[Job, ...]) -> list[dict[str, Any]]:
    assert _WORLD is not None, "the worker was started without its world"
    return [row for job in unit for row in run_job(_WORLD, job)]


def same_file_units(jobs: Sequence[Job]) -> list[tuple[Job, ...]]:
    """Consecutive jobs on one file, transform and seed (its settings), as one unit of a
    worker: the twin of a seed is made, and the data-only fits on it are grown, once rather
    than by each worker that runs one of its settings."""
    return [
        tuple(unit) for _, unit in groupby(jobs, key=lambda j: (j.dataset, j.transform, j.seed))
    ]


class WorkerPool:
    """``workers`` processes forked from this one, each holding ``world`` and keeping what it
    loads (files, twins, fits) for every unit it runs. A free worker takes the first unit
    left that is a twin (made afresh at each seed), or on a real file it has run before or
    that no other worker has; else the first unit left. A file's fits are thus grown in one
    worker rather than in each, while no worker waits when work is left."""

    def __init__(self, world: World, workers: int) -> None:
        context = multiprocessing.get_context("fork")
        self._workers = [
            ProcessPoolExecutor(1, context, _start_worker, (world,)) for _ in range(workers)
        ]
        self._files: list[set[str]] = [set() for _ in self._workers]

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *_: object) -> None:
        for worker in self._workers:
            worker.shutdown()

    def _take(self, worker: int, units: list[tuple[Job, ...]]) -> tuple[Job, ...]:
        """Remove and return the unit ``worker`` runs next (see the class)."""
        mine = self._files[worker]
        others = set().union(*(f for i, f in enumerate(self._files) if i != worker))

        def suits(unit: tuple[Job, ...]) -> bool:
            first = unit[0]
            return (
                first.transform != "original"
                or first.dataset in mine
                or first.dataset not in others
            )

        unit = units.pop(next((n for n, u in enumerate(units) if suits(u)), 0))
        if unit[0].transform == "original":
            mine.add(unit[0].dataset)
        return unit

    def run(
        self,
        units: Sequence[tuple[Job, ...]],
        advance: Callable[[list[dict[str, Any]]], None],
        deadline: float = math.inf,
    ) -> tuple[list[dict[str, Any]], int]:
        """The cell rows of the units run and how many jobs ran (see ``run_jobs``)."""
        left = list(units)
        busy: dict[Future[list[dict[str, Any]]], int] = {}
        rows: list[dict[str, Any]] = []
        started = 0
        while True:
            for worker in range(len(self._workers)):
                if worker in busy.values() or not left or time.perf_counter() >= deadline:
                    continue
                unit = self._take(worker, left)
                busy[self._workers[worker].submit(_work, unit)] = worker
                started += len(unit)
            if not busy:
                return rows, started
            finished, _ = wait(busy, return_when=FIRST_COMPLETED)
            for future in finished:
                del busy[future]
                done = future.result()
                rows += done
                advance(done)


def run_jobs(
    world: World,
    jobs: Sequence[Job],
    workers: int,
    advance: Callable[[list[dict[str, Any]]], None],
    deadline: float = math.inf,
    pool: WorkerPool | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The cell rows of the jobs run, and how many ran: in order, in this process (one
    worker) or on ``pool`` (else a ``WorkerPool`` of ``workers`` for this call) a
    ``same_file_units`` unit at a time, each job (unit) started before ``deadline``
    (``time.perf_counter``) finished, none started after it; ``advance`` gets the cell rows
    of each job (unit) as it finishes."""
    rows: list[dict[str, Any]] = []
    started = 0
    if workers <= 1:
        for job in jobs:
            if time.perf_counter() >= deadline:
                break
            started += 1
            done = run_job(world, job)
            rows += done
            advance(done)
        return rows, started
    if pool is None:
        with WorkerPool(world, workers) as own:
            return own.run(same_file_units(jobs), advance, deadline)
    return pool.run(same_file_units(jobs), advance, deadline)


PARTIAL_CELLS = "reference_cells.partial.csv"
"""Where a run writes each job's cells as it finishes, so that a run that dies keeps them;
removed once ``reference_cells.csv`` holds them all."""


def job_cells(job: Job, settings: dict[str, dict[str, Any]]) -> int:
    """The cells a job adds: each model × test at its setting, and again at each setting of
    ``also`` where the test's config is the same."""
    counted = sum(
        1 + sum(settings[s][t] == settings[job.setting][t] for s in job.also) for t in job.tests
    )
    return len(job.models) * counted


def report_console() -> Console:
    """The console the tables print on: the terminal's width, or 120 columns where the output
    is a log file (rich's 80 cut the tests' names)."""
    return Console(width=None if sys.stdout.isatty() else 120)


def calibrate(
    size: Size,
    out: Path,
    workers: int = 2,
    console: Console | None = None,
    minutes: float = math.inf,
) -> Outcome:
    """Run a size and write its files into ``out``; print the FPR table and the time. Jobs
    run seed by seed, then the top-up (``top_up_jobs``) until every test has its applicable
    negative cells or a round adds none; no job starts after ``minutes`` (the tables then
    count the cells that ran, and say how many jobs did). The progress bar counts cells (a
    job's arrive together)."""
    console = console or report_console()
    started = time.perf_counter()
    deadline = started + 60 * minutes
    world = compose_world(size)
    # Seed by seed, the largest files first (their jobs take longest), a file's settings
    # side by side (one worker's unit); loaded here, before the workers fork, so that they
    # share the parsed files.
    rows = {d: len(world.dataset(d, "original", 0).rows) for d in size.datasets}
    jobs = sorted(
        plan_jobs(size, world.settings),
        key=lambda j: (j.seed, -rows[j.dataset], j.dataset, j.transform, j.setting),
    )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    out.mkdir(parents=True, exist_ok=True)
    partial = out / PARTIAL_CELLS
    cells: list[dict[str, Any]] = []
    planned = ran = 0
    with (
        Progress(*columns, console=console, transient=True) as progress,
        partial.open("w", newline="") as handle,
        WorkerPool(world, workers) if workers > 1 else nullcontext() as pool,
    ):
        task = progress.add_task("calibration cells", total=0)
        log = _PlainProgress(console, started)
        writer = csv.DictWriter(handle, fieldnames=list(CELL_FIELDS), extrasaction="ignore")
        writer.writeheader()

        def advance(done: list[dict[str, Any]]) -> None:
            writer.writerows(done)
            handle.flush()
            progress.advance(task, len(done))
            log.advance(len(done))

        smallest = sorted(size.datasets, key=rows.__getitem__)
        while jobs:
            total = sum(job_cells(j, world.settings) for j in jobs)
            planned += len(jobs)
            progress.update(task, total=progress.tasks[0].total + total)
            progress.update(task, description=f"calibration cells ({planned} jobs)")
            log.total += total
            try:
                done, started_jobs = run_jobs(world, jobs, workers, advance, deadline, pool)
            except Exception as error:  # a worker died, or a cell raised: keep what finished
                why = (
                    "a worker process died (killed for memory?)"
                    if isinstance(error, BrokenProcessPool)
                    else f"a cell failed ({type(error).__name__}: {error})"
                )
                raise RuntimeError(
                    f"{why}; the cells of the jobs that finished are in {partial}: tabulate "
                    "them with --from-cells, and run the seeds they lack with --first-seed"
                ) from error
            cells += done
            ran += started_jobs
            if started_jobs < len(jobs) or not _adds_applicable(done):
                break
            jobs = sorted(
                top_up_jobs(size, world.settings, cells, smallest),
                key=lambda j: (-rows[j.dataset], j.dataset, j.transform, j.seed, j.setting),
            )
    seconds = time.perf_counter() - started
    outcome = tabulate(cells, out, console, seconds, workers, (ran, planned))
    partial.unlink()
    return outcome


def _adds_applicable(cells: Sequence[dict[str, Any]]) -> bool:
    """Whether a round of jobs gave an applicable negative cell (else a top-up would not)."""
    return any(r["verdict"] != Verdict.NOT_APPLICABLE and role(r) == "negative" for r in cells)


def tabulate(
    cells: list[dict[str, Any]],
    out: Path,
    console: Console,
    seconds: float = 0.0,
    workers: int = 0,
    jobs: tuple[int, int] = (0, 0),
) -> Outcome:
    """The dataset verdicts, the FPR and power tables and the figure of ``cells``, written
    into ``out`` and the FPR table printed with the time."""
    present = {str(r["test"]) for r in cells}
    tests = [t for t in rows_seen_tests() if t in present]
    verdicts = [
        row
        for label, members in verdict_suites(tests).items()
        for row in dataset_verdicts(cells, members=members, label=label)
    ]
    outcome = Outcome(
        cells,
        verdicts,
        fpr_rows(cells, verdicts, tests),
        power_rows(cells, verdicts, tests),
        seconds,
        workers,
        jobs,
    )
    outcome.files = write_outputs(outcome, out)
    print_summary(outcome, console)
    return outcome


def verdict_suites(tests: Sequence[str]) -> dict[str, tuple[str, ...] | None]:
    """The dataset verdicts the tables give, by label: the product's (every test of rows seen
    that ran), and, where they combine other tests than that, the same without the sample
    test, over the memorization suite's tests (``test=memorization``), and those without
    the sample test. The sample test's power on the partial memorizers is the share of
    samples they volunteer; these say what the other tests find without it."""
    memorization = set(dict(test_plan(compose_config(["test=memorization"]).test)))
    variants = {
        f"{DATASET_VERDICT}, no sample": [t for t in tests if t != "sample"],
        "memorization suite": [t for t in tests if t in memorization],
        "memorization suite, no sample": [t for t in tests if t in memorization - {"sample"}],
    }
    suites: dict[str, tuple[str, ...] | None] = {DATASET_VERDICT: None}
    seen = [list(tests)]
    for label, members in variants.items():
        if members and members not in seen:
            suites[label] = tuple(members)
            seen.append(members)
    return suites


CELL_KEY = (*VERDICT_KEY, "test")
"""What names a cell: runs whose seeds overlap give the same cell twice, counted once."""


def read_cells(*paths: Path) -> list[dict[str, Any]]:
    """The cells of one or more ``reference_cells.csv`` with their numbers typed again; a
    cell that several files hold (the same ``CELL_KEY``) once."""
    rows, seen = [], set()
    for path in paths:
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                key = tuple(row[name] for name in CELL_KEY)
                if key not in seen:
                    seen.add(key)
                    rows.append(row)
    for row in rows:
        row["seed"] = int(row["seed"])
        row["share"] = float(row["share"]) if row["share"] else ""
        row["n_hits"], row["n_queries"] = int(row["n_hits"]), int(row["n_queries"])
        for name in ("p_value", "baseline"):
            row[name] = float(row[name]) if row[name] else None
    return rows


class _PlainProgress:
    """Where the console is no terminal (a log file), a line at most once a minute as jobs
    finish, so a long run shows how far it is; on a terminal the progress bar shows it.
    ``total`` grows as top-up jobs are planned."""

    def __init__(self, console: Console, started: float) -> None:
        self.console, self.started, self.shown = console, started, started
        self.done = self.total = 0

    def advance(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if not self.console.is_terminal and (now - self.shown >= 60 or self.done == self.total):
            self.shown = now
            self.console.print(f"{self.done}/{self.total} cells, {now - self.started:.0f} s")


def inapplicable_reasons() -> dict[str, str]:
    """Why a test of rows seen has no applicable cell on the reference models: it needs a
    capability (read from its declaration) that answers in text do not give."""
    oracles = capabilities_of(OracleObjectBackend)
    return {
        test: f"not applicable on oracles (needs {' or '.join(sorted(needs))})"
        for test in rows_seen_tests()
        if not (needs := needs_of(test)) & oracles
    }


def write_outputs(outcome: Outcome, out: Path) -> list[Path]:
    """``reference_cells.csv``, ``reference_dataset_verdicts.csv``, ``reference_fpr.md``,
    ``reference_power.md`` and ``reference_power.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    cells_path = out / "reference_cells.csv"
    _write_csv(cells_path, CELL_FIELDS, outcome.cells)
    verdicts_path = out / "reference_dataset_verdicts.csv"
    _write_csv(verdicts_path, VERDICT_FIELDS, outcome.verdicts)
    fpr_path = out / "reference_fpr.md"
    fpr_path.write_text(fpr_markdown(outcome))
    power_path = out / "reference_power.md"
    power_path.write_text(
        "# Power of the tests of rows seen on partial memorizers (in-process calibration)\n\n"
        f"{describe(outcome)}\n\nTPR = `evidence` among applicable cells, with its "
        "Clopper-Pearson 95 % interval; `rest` is what answers the rows the partial "
        "memorizer does not know.\n\n"
        + power_markdown(outcome.power)
        + "\n\n"
        + file_power_markdown(outcome.verdicts)
        + "\n"
    )
    figure_path = out / "reference_power.png"
    power_figure(outcome.power, figure_path)
    return [cells_path, verdicts_path, fpr_path, power_path, figure_path]


def describe(outcome: Outcome) -> str:
    """One paragraph, read from the cells: which files, models, shares, rests, seeds and
    settings ran, how many cells, how long."""
    cells = outcome.cells

    def listed(field: str, rows: Sequence[dict[str, Any]]) -> str:
        return ", ".join(sorted({str(r[field]) for r in rows}, key=_natural)) or "none"

    negative = [r for r in cells if role(r) == "negative" and r["transform"] != "twin"]
    twins = [r for r in cells if r["transform"] == "twin"]
    power = [r for r in cells if role(r) == "power"]
    partial = (
        f"shares {listed('share', power)}, rests {listed('rest', power)}, seeds "
        f"{listed('seed', power)}"
        if power
        else "none"
    )
    return (
        f"Files: {listed('dataset', cells)}. Negatives: {listed('model', negative)} on the "
        f"real files (seeds {listed('seed', negative)}), {listed('model', twins)} on twins "
        f"(seeds {listed('seed', twins)}). Partial memorizers: {partial}. Settings: "
        f"{listed('setting', cells)}. {len(cells)} cells{_timing(outcome)}."
    )


def _timing(outcome: Outcome) -> str:
    """ ", N s with W worker(s)" for a run; ", tabulated from recorded cells" otherwise."""
    if not outcome.workers:
        return ", tabulated from recorded cells"
    return f", {outcome.seconds:.0f} s with {outcome.workers} worker(s){_cut_short(outcome)}"


def _natural(text: str) -> tuple[float, str]:
    """Numbers by value, then text: seeds 2 before 10."""
    try:
        return float(text), ""
    except ValueError:
        return math.inf, text


def _cut_short(outcome: Outcome) -> str:
    """ ", stopped at its time limit after N of M jobs" when the run did not run every job."""
    ran, planned = outcome.jobs
    return f", stopped at its time limit after {ran} of {planned} jobs" if ran < planned else ""


def fpr_markdown(outcome: Outcome) -> str:
    """``reference_fpr.md``: the negatives' table, per setting and test, and the dataset
    verdicts; then ``evidence`` per negative family and per file."""
    body = fpr_table(outcome.fpr, inapplicable_reasons())
    tests = [t for t in rows_seen_tests() if t in {str(r["test"]) for r in outcome.cells}]
    return (
        "# False positives of the tests of rows seen on reference negatives (in-process)\n\n"
        f"{describe(outcome)}\n\nA cell is applicable unless its test said "
        "`not_applicable`; the bound is the exact one-sided 95 % upper bound of the FPR "
        "(with 0 of n: 1 - 0.05^(1/n)). Two units: the cell (one model, file, seed and "
        "setting), and the model × file group, whose cells share the model's knowledge of "
        "the file and are not independent draws; the group bound is the one to quote. A "
        "test asked at the same counts at both settings is run once and counted at both. A "
        "test that was `not_applicable` on some of the negatives' cells is run on further "
        "seeds, on the files where it applied, until it has as many applicable cells as the "
        "run planned per test. The dataset verdict's variants combine the tests of a suite "
        "(`memorization suite`: `test=memorization`) or leave the sample test out.\n\n"
        + markdown_table(FPR_HEADER, body)
        + "\n\n## `evidence` / applicable cells per negative\n\n"
        + breakdown_markdown(outcome.cells, outcome.verdicts, tests, "model", BASELINE_SHARED)
        + "\n\n## `evidence` / applicable cells per file\n\n"
        + breakdown_markdown(outcome.cells, outcome.verdicts, tests, "dataset")
        + "\n"
    )


def print_summary(outcome: Outcome, console: Console) -> None:
    """The FPR table and one line of time, on the terminal."""
    table = Table(title="False positives on reference negatives")
    for name in FPR_HEADER:
        table.add_column(name)
    for row in fpr_table(outcome.fpr, inapplicable_reasons()):
        style = "bold" if row[1] == DATASET_VERDICT else None
        table.add_row(*(str(c) for c in row), style=style)
    console.print(table)
    rate = len(outcome.cells) / outcome.seconds if outcome.seconds else 0.0
    timing = f" in {outcome.seconds:.1f} s ({rate:.1f} cells/s, {outcome.workers} worker(s))"
    console.print(
        f"{len(outcome.cells)} cells and {len(outcome.verdicts)} dataset verdicts"
        + (timing + _cut_short(outcome) if outcome.workers else ", tabulated from recorded cells")
    )


def _write_csv(path: Path, fields: Sequence[str], rows: Sequence[dict[str, Any]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
