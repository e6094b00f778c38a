"""What would stop a cell, found before it starts: one check for the grid, the runner and the
dry run.

``cell_problems`` checks one composed cell config: ``budget_usd`` and ``seed``; every setting
of each of its tests, against the type its test's settings class declares and the range
``RANGES`` gives its name; the data file (read and checked as the run would read it); and what
the model needs from the environment (an API key, a server's URL). Each problem is one
sentence. The runner asks it before the tracking store opens (a cell from the Python API);
the dry run before it plans.

``GridPreflight``, a Hydra callback, asks it for every cell of a run or sweep before the first
cell starts: each distinct problem is printed once, with the number of cells it stops, and the
command exits with status 1; nothing runs and nothing is logged. Cells that already finished
are not checked (they are skipped anyway), and a re-run says how many it resumes from. A dry
run checks the same cells: a missing key or server URL does not keep it from pricing the grid
(it sends nothing), but it is said before the bill and in its note, and the dry run then exits
with status 1, as the real run would stop there. On Ctrl-C the command says what is kept and
how to resume (``interrupted_note``).
"""

from __future__ import annotations

import math
import sys
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from tabmem.errors import ConfigError, ProviderError, TabmemError


@dataclass(frozen=True)
class Bound:
    """The values a numeric setting takes: ``low`` and ``high`` (None: no limit), each
    excluded where ``open``; ``why`` says, where it helps, what a value outside means."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""

    def holds(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def words(self, whole: bool) -> str:
        """What the setting takes: "a whole number of at least 1", "a number above 0 and
        below 1"."""
        kind = "a whole number" if whole else "a number"

        def shown(x: float) -> str:
            return f"{x:g}"

        low = high = ""
        if self.low is not None:
            low = f"above {shown(self.low)}" if self.low_open else f"at least {shown(self.low)}"
        if self.high is not None:
            high = f"below {shown(self.high)}" if self.high_open else f"at most {shown(self.high)}"
        if low and high and not self.low_open and not self.high_open:
            limits = f"from {shown(self.low)} to {shown(self.high)}"  # type: ignore[arg-type]
        else:
            limits = " and ".join(part for part in (low, high) if part)
        text = f"{kind} {limits}".strip() if limits else kind
        if kind == "a whole number" and limits.startswith("at least"):
            text = f"{kind} of {limits}"
        return f"{text} ({self.why})" if self.why else text


ASKED = Bound(1, why="a test asked for nothing has nothing to tell")
AT_LEAST_ONE = Bound(1)
COUNT = Bound(0)
LEVEL = Bound(0, 1, low_open=True, high_open=True, why="a level of significance")
SHARE = Bound(0, 1)
PERCENT = Bound(0, 100, low_open=True)

RANGES: dict[str, Bound] = {
    # what a test asks: queries, rows, samples, problems
    "n_queries": ASKED,
    "n_rows": ASKED,
    "n_samples": ASKED,
    "n_problems": ASKED,
    "n_test_rows": ASKED,
    "n_per_feature": ASKED,
    "max_tokens": AT_LEAST_ONE,
    "split_rows": AT_LEAST_ONE,
    "dimensions": AT_LEAST_ONE,
    "row_counts": AT_LEAST_ONE,
    "n_options": Bound(2, why="a choice needs two options at least"),
    # levels, confidences, shares and percentages
    "alpha": LEVEL,
    "weak_alpha": LEVEL,
    "file_alpha": LEVEL,
    "confidence": Bound(0, 1, low_open=True, high_open=True),
    "exchangeable_min_p": SHARE,
    "min_recovery": SHARE,
    "k_percent": PERCENT,
    "k_percents": PERCENT,
    "k_plus_plus": PERCENT,
    "temperature": Bound(0),
    "tie_tolerance": Bound(0),
}
"""The range of a test setting, by its name (every test that has the setting means the same by
it). A name not here takes the range of its ending (``SUFFIXES``), else of its type (``INTS``:
counts and sizes, never negative; floats are not bounded)."""
SUFFIXES: dict[str, Bound] = {"_fraction": SHARE, "_share": SHARE, "_rate": SHARE}
INTS = COUNT


def setting_bound(name: str, whole: bool) -> Bound | None:
    """The range a test setting called ``name`` must lie in (``whole``: an int setting)."""
    if name in RANGES:
        return RANGES[name]
    for suffix, bound in SUFFIXES.items():
        if name.endswith(suffix):
            return bound
    return INTS if whole else None


def _shown(value: Any) -> str:
    """A value as the command line writes it ('abc', true, 2.5)."""
    if isinstance(value, str):
        return repr(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _number_problem(path: str, value: Any, whole: bool, where: str) -> str:
    """One sentence for a number setting ``path`` whose ``value`` is of the wrong kind or out
    of its range; "" when it is fine."""
    name = path.rsplit(".", 1)[-1].split("[", 1)[0]
    bound = setting_bound(name, whole)
    expected = bound.words(whole) if bound else ("a whole number" if whole else "a number")
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    fits = is_number and (isinstance(value, int) or not whole)
    if fits and (bound is None or bound.holds(float(value))):
        return ""
    return _misfit(path, value, where, expected)


def _misfit(path: str, value: Any, where: str, expected: str) -> str:
    return f"{path}={_shown(value)} does not fit {where}: it takes {expected}."


def settings_problems(
    settings: type, values: Mapping[str, Any], path: str, where: str
) -> list[str]:
    """Each number, list of numbers or true/false setting of ``values`` (a test's composed
    config) that does not fit what ``settings`` (its ``TestSettings`` class) declares, or the
    range its name takes; then, if none, what loading the settings still finds (a setting
    missing or unknown). ``path``: how the command line names the section (``test.``)."""
    from tabmem.battery.settings import TestSettings

    hints = typing.get_type_hints(settings)
    problems: list[str] = []
    for declared in fields(settings):
        if declared.name not in values:
            continue
        kind, value = hints[declared.name], values[declared.name]
        here = f"{path}{declared.name}"
        optional = typing.get_origin(kind) in (typing.Union, types.UnionType)
        if optional:
            if value is None and type(None) in typing.get_args(kind):
                continue
            inner = [a for a in typing.get_args(kind) if a is not type(None)]
            kind = inner[0] if len(inner) == 1 else kind
        if isinstance(kind, type) and issubclass(kind, TestSettings):
            if isinstance(value, Mapping):
                problems += settings_problems(kind, value, f"{here}.", where)
            continue
        items: Iterable[tuple[str, Any]] = [(here, value)]
        if typing.get_origin(kind) is list and isinstance(value, list | tuple):
            kind = typing.get_args(kind)[0]
            items = [(f"{here}[{i}]", v) for i, v in enumerate(value)]
        for item_path, item in items:
            if kind in (int, float):
                problem = _number_problem(item_path, item, kind is int, where)
            elif kind is bool and not isinstance(item, bool):
                problem = _misfit(item_path, item, where, "true or false")
            else:
                problem = ""
            if problem:
                problems.append(problem)
    if not problems:
        try:
            settings.load(values, where)  # type: ignore[attr-defined]
        except TabmemError as exc:
            problems.append(str(exc))
    return problems


def _settings_class(name: str) -> type | None:
    """The ``TestSettings`` class test ``name`` loads its config into (its module alone is
    imported); None for a test registered without one."""
    from tabmem.battery.base import get_test

    owner = getattr(get_test(name), "__self__", None)
    return getattr(owner, "settings", None)


def test_problems(cfg: Any, tests: Sequence[tuple[str, Any]]) -> list[TabmemError]:
    """The problems of the settings of ``tests`` ((name, composed config) pairs of the cell
    ``cfg``), each named as the command line writes it (``test.n_queries``, and in a suite
    ``test.row_completion.n_queries``)."""
    from omegaconf import OmegaConf

    from tabmem.suites import is_suite

    suite = is_suite(cfg.test)
    problems: list[TabmemError] = []
    for name, test_cfg in tests:
        path = f"test.{name}." if suite else "test."
        try:
            settings = _settings_class(name)
            values = (
                OmegaConf.to_container(test_cfg, resolve=True)
                if OmegaConf.is_config(test_cfg)
                else dict(test_cfg)
            )
        except TabmemError as exc:
            problems.append(exc)
            continue
        except Exception as exc:  # an interpolation that does not resolve
            problems.append(ConfigError(f"The settings of test={name} cannot be read: {exc}."))
            continue
        if settings is not None and isinstance(values, Mapping):
            problems += [
                ConfigError(p) for p in settings_problems(settings, values, path, f"test={name}")
            ]
    return problems


def run_problems(cfg: Any) -> list[TabmemError]:
    """A ``budget_usd`` below zero or not a number, a ``seed`` that is not a whole number."""
    problems: list[TabmemError] = []
    limit = cfg.get("budget_usd")
    try:
        if limit is not None and not float(limit) >= 0:
            raise ValueError
    except (TypeError, ValueError):
        problems.append(
            ConfigError(
                f"budget_usd={limit} is not a budget: give the most the grid may spend in US "
                "dollars (budget_usd=5), or leave it out for no cap."
            )
        )
    seed = cfg.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        problems.append(ConfigError(f"seed must be a whole number (seed=0), not {_shown(seed)}."))
    return problems


def data_problem(cfg: Any) -> TabmemError | None:
    """The data file's problem (missing, unreadable, empty, not CSV …), read as the run reads
    it (the cell's own load then reuses what was read)."""
    from tabmem.data import load_dataset

    try:
        load_dataset(cfg.dataset)
    except TabmemError as exc:
        return exc
    return None


def credentials_problems(cfg: Any) -> list[TabmemError]:
    """What the cell's model needs from the environment and does not find there."""
    from tabmem.llm.backends import credentials_problems as missing

    try:
        return [ProviderError(sentence) for sentence in missing(cfg.model)]
    except TabmemError as exc:  # an unknown backend, a package not installed: said as it is
        return [exc]


def price_problem(cfg: Any) -> TabmemError | None:
    """A ``budget_usd`` for a model whose price is unknown."""
    if cfg.get("budget_usd") is None:
        return None
    from tabmem.llm.pricing import model_price, unpriced_budget

    if model_price(cfg.model, batch=bool(cfg.get("batch"))) is None:
        return ConfigError(unpriced_budget(str(cfg.model.name)))
    return None


def cell_tests(cfg: Any) -> list[tuple[str, Any, str]]:
    """The tests of the cell ``cfg`` that a grid does not skip (``skip_unrunnable``), each with
    its composed config and its ``config_hash``."""
    from tabmem.cell import cell_params, config_hash
    from tabmem.jobs import skip_reason, test_plan

    return [
        (name, test_cfg, config_hash(cell_params({**cfg, "test": test_cfg})))
        for name, test_cfg in test_plan(cfg.test)
        if not skip_reason(cfg, name)
    ]


def cell_problems(
    cfg: Any,
    tests: Sequence[tuple[str, Any]] | None = None,
    credentials: bool = True,
) -> list[TabmemError]:
    """Everything found in the cell ``cfg`` that would stop it, one error each: the run's
    settings, the settings of ``tests`` (default: every test the cell runs), the data file and,
    with ``credentials``, the model's key and server URL. Empty when the cell can start."""
    problems = run_problems(cfg)
    try:
        chosen = list(tests) if tests is not None else [(n, t) for n, t, _ in cell_tests(cfg)]
    except TabmemError as exc:  # a suite member that does not exist
        return [*problems, exc]
    problems += test_problems(cfg, chosen)
    if chosen:
        found = data_problem(cfg)
        problems += [found] if found is not None else []
        if credentials:
            problems += credentials_problems(cfg)
            price = price_problem(cfg)
            problems += [price] if price is not None else []
    return problems


# --- before a run or sweep starts ------------------------------------------------------------


@dataclass
class Launch:
    """What the preflight learnt about the run or sweep it let start: its folder, its store
    (a SQLite file, else None), the config hashes of its tests, and how many had finished."""

    folder: Path
    store: Path | None = None
    experiment: str = ""
    hashes: list[str] = field(default_factory=list)
    finished_before: int = 0
    dry_run: bool = False


_launch: Launch | None = None


def grid_cells(config: Any) -> list[Any] | None:
    """Every cell of the sweep ``config`` (as Hydra's basic sweeper composes them, from the
    grid's ``hydra.sweeper.params`` and the command line), or None where another sweeper
    decides or the composition fails (Hydra then says why)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not str(config.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return None
    try:
        params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
        loader = GlobalHydra.instance().config_loader()
        parser = OverridesParser.create(config_loader=loader)
        overrides = parser.parse_overrides([*params, *config.hydra.overrides.task])
        [jobs] = BasicSweeper.split_arguments(overrides, None)
        return [loader.load_sweep_config(config, list(job)) for job in jobs]
    except Exception:
        return None


@dataclass
class GridCheck:
    """The problems of a run's or sweep's cells, each with the cells it stops, and how many of
    its tests had finished already."""

    problems: dict[str, list[str]] = field(default_factory=dict)  # sentence: cells
    unsent: dict[str, list[str]] = field(default_factory=dict)  # a dry run's missing keys
    tests: int = 0
    finished: int = 0
    hashes: list[str] = field(default_factory=list)


def check_cells(cells: Sequence[Any], dry_run: bool, quiet_data: bool = False) -> GridCheck:
    """Check each cell once: its tests that would run (in a real run, those not finished in its
    store), then their data, settings and model. In a dry run a missing key or server URL is
    kept apart (``unsent``): it does not keep the grid from being priced. ``quiet_data``: leave
    the note on a sniffed delimiter to the cells' own processes (a sweep's workers)."""
    import logging

    from tabmem.cell import Cell

    check = GridCheck()
    stores: dict[tuple[Path, str], set[str]] = {}
    registry_log = logging.getLogger("tabmem.data.registry")
    level = registry_log.level
    if quiet_data:
        registry_log.setLevel(logging.WARNING)

    def said(problem: TabmemError, where: Sequence[str], into: dict[str, list[str]]) -> None:
        into.setdefault(str(problem), []).extend(where)

    try:
        for cfg in cells:
            cell = Cell.from_config(cfg)
            try:
                tests = cell_tests(cfg)
            except TabmemError as exc:  # a suite member that does not exist
                said(exc, [cell.run_name], check.problems)
                check.tests += 1
                continue
            check.tests += len(tests)
            check.hashes += [h for _, _, h in tests]
            pending = tests
            if not dry_run and not cfg.get("force"):
                done = _finished(cfg, [h for _, _, h in tests], stores)
                check.finished += sum(h in done for _, _, h in tests)
                pending = [t for t in tests if t[2] not in done]
            if not pending:
                continue
            names = [replace(cell, test=name).run_name for name, _, _ in pending]
            for (name, test_cfg, _), where in zip(pending, names, strict=True):
                for problem in test_problems(cfg, [(name, test_cfg)]):
                    said(problem, [where], check.problems)
            found = data_problem(cfg)
            whole = [*run_problems(cfg), *([found] if found is not None else [])]
            missing = credentials_problems(cfg)
            if not dry_run:
                price = price_problem(cfg)
                whole += [*missing, *([price] if price is not None else [])]
            for problem in whole:
                said(problem, names, check.problems)
            for problem in missing if dry_run else []:
                said(problem, names, check.unsent)
    finally:
        registry_log.setLevel(level)
    return check


def _store_file(cfg: Any) -> tuple[Path, str] | None:
    """The SQLite file and experiment a cell's runs go to; None for a remote store (it is
    asked by the cell itself)."""
    from tabmem.jobs import outputs_dir
    from tabmem.tracking.store import sqlite_path, tracking_uri

    path = sqlite_path(tracking_uri(cfg.tracking.uri, outputs_dir(cfg)))
    return (path, str(cfg.experiment)) if path is not None else None


def _finished(cfg: Any, hashes: list[str], stores: dict[tuple[Path, str], set[str]]) -> set[str]:
    """Which of ``hashes`` finished in the cell's store (read once per store and grid)."""
    import sqlite3

    from tabmem.tracking.store import finished_hashes

    where = _store_file(cfg)
    if where is None:
        return set()
    if where not in stores:
        stores[where] = set()
    missing = [h for h in hashes if h not in stores[where]]
    try:
        stores[where] |= finished_hashes(where[0], where[1], missing)
    except sqlite3.Error:  # a store being created or migrated: the cell asks it itself
        return set()
    return stores[where] & set(hashes)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _cells_text(cells: list[str], total: int) -> str:
    if total == 1:
        return ""
    if len(cells) == 1:
        return f" (cell {cells[0]})"
    return f" ({len(cells)} of {total} cells)"


def _program() -> str:
    return Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "tabmem run"


class GridPreflight(Callback):
    """Hydra callback: check every cell before the run or sweep starts (``check_cells``); on a
    problem, say each once and exit with status 1 before anything runs or is logged. A re-run
    says how many finished cells it resumes from; a dry run whose models lack a key or a server
    URL still prints its bill, then exits with status 1."""

    def __init__(self) -> None:
        self.unsent: dict[str, list[str]] = {}

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        self._check(config, [config], Path(str(config.hydra.run.dir)), grid=False)

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        cells = grid_cells(config)
        if cells is not None:
            self._check(config, cells, Path(str(config.hydra.sweep.dir)), grid=True)

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        self._unsent_status()

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        self._unsent_status()

    def _check(self, config: Any, cells: list[Any], folder: Path, grid: bool) -> None:
        global _launch
        dry_run = bool(config.get("dry_run"))
        check = check_cells(cells, dry_run, quiet_data=grid)
        said = _program()
        total = check.tests
        if check.problems:
            if len(check.problems) == 1 and total == 1:
                [sentence] = check.problems
                print(f"{said}: {sentence} Nothing was run or logged.", file=sys.stderr)
            else:
                what = "grid" if grid else "run"
                print(
                    f"{said}: this {what} cannot start ({_count(len(check.problems), 'problem')}; "
                    "nothing was run or logged):",
                    file=sys.stderr,
                )
                for sentence, where in check.problems.items():
                    print(f"  {sentence}{_cells_text(where, total)}", file=sys.stderr)
            sys.exit(1)
        if check.unsent:
            print(
                f"{said}: dry run: nothing is sent, so the bill below is complete, but a real "
                "run would stop before its first cell:",
                file=sys.stderr,
            )
            for sentence, where in check.unsent.items():
                print(f"  {sentence}{_cells_text(where, total)}", file=sys.stderr)
        self.unsent = check.unsent
        store = _store_file(cells[0]) if cells else None
        _launch = Launch(
            folder,
            store[0] if store else None,
            store[1] if store else "",
            check.hashes,
            check.finished,
            dry_run,
        )
        if check.finished and not dry_run:
            left = check.tests - check.finished
            print(
                f"Resuming: {check.finished} of {check.tests} cells finished in an earlier run "
                f"and are kept (force=true runs them again); "
                + (f"{left} to run." if left else "nothing left to run."),
                flush=True,
            )

    def _unsent_status(self) -> None:
        """A dry run that found missing keys or server URLs ends with status 1."""
        if self.unsent:
            print(
                f"{_program()}: dry run: exit status 1, as the real run would stop at the "
                "missing settings said before the bill.",
                file=sys.stderr,
            )
            sys.exit(1)


def interrupted_note() -> str:
    """What Ctrl-C leaves: the cells finished (in this run or before) and how to go on."""
    launch = _launch
    if launch is None or launch.dry_run:
        return "Interrupted; nothing was run or logged yet."
    done = _finished_now(launch)
    total = len(launch.hashes)
    if done is None:
        return (
            "Interrupted; the cells that finished are kept, with every answer received so far; "
            "run the same command again to resume the rest."
        )
    kept = f"{done} of {total} cells finished are kept" if total else f"{done} cells are kept"
    return (
        f"Interrupted; {kept}, with every answer received so far; run the same command again "
        "to resume the rest."
    )


def _finished_now(launch: Launch) -> int | None:
    """How many of the launch's tests have a finished run now; None without a SQLite store."""
    import sqlite3

    from tabmem.tracking.store import finished_hashes

    if launch.store is None:
        return None
    try:
        return len(finished_hashes(launch.store, launch.experiment, launch.hashes))
    except sqlite3.Error:
        return None
