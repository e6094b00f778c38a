"""Benchmark 7: how long ``tabmem`` takes before and around the work, against issue 41's targets.

Each figure is the wall time of a fresh ``tabmem`` process on this machine (the best of
``--repeats``), in a temporary folder with its own outputs and MLflow store, beside the CPU
seconds of the process and its workers (on a shared machine wall time grows with the load,
CPU time much less):

- ``tabmem --help`` and ``tabmem run --help``;
- a finished cell: ``tabmem run model=oracle-memorizer dataset=iris test=header`` the second
  time, when the same configuration is already FINISHED in the store and is only skipped;
- one reference-model cell: ``model=oracle-null`` on iris, the first time, on a store that
  exists (a copy of the memorizer's);
- a bad data file (ragged rows, then a missing file) as ``dataset=csv dataset.path=…``: the
  seconds until its one sentence is printed, before the cell starts (the process then exits
  with status 1, nothing logged);
- an override of a setting the test lacks (``test.num_queries=abc``): its one sentence;
- the demo grid with every cell finished (``tabmem run +grid=demo`` the second time: the
  embedded model is not loaded); the first pass runs the model and is not timed.

The processes may write bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped for them): an installed
package has it, so the first, untimed runs leave what a user's install has and the figures do not
time Python compiling MLflow's modules again on every start.

It prints one table (figure, seconds, CPU seconds, target, PASS or FAIL, a note) and writes it
as Markdown to ``outputs/bench/startup.md`` (``--out``; ``startup-smoke.md`` at the smoke
size), which docs/reliability.md links.

    python scripts/bench_startup.py [--repeats 3]
    python scripts/bench_startup.py --smoke   # one repeat, the demo grid on iris with 2 queries
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_common import ROOT, add_smoke_flag, print_table

# --smoke: the demo grid on iris alone, one few-shot example, two short queries, answered by
# the memorizer (the figure is the re-run, which loads no model; the first pass need not load
# the embedded one).
DEMO_SMOKE = [
    "model=oracle-memorizer",
    "hydra.sweeper.params.dataset=iris",
    "test.few_shot=1",
    "test.split_rows=[1,2]",
    "test.n_rows=3",
    "test.few_shot_row=2",
]
QUIET = ["progress=false", "show_queries=false"]
RAGGED = "a,b,c\n1,2,3\n4,5\n6,7,8\n"
HEADERS = ["figure", "seconds", "cpu s", "target", "", "note"]


@dataclass
class Run:
    """One ``tabmem`` process: wall and CPU seconds, when a sentence appeared, its output."""

    wall: float
    cpu: float
    seen: float | None
    output: str


@dataclass
class Figure:
    """One measured figure beside its target (``None``: measured, no target)."""

    name: str
    seconds: float
    cpu: float
    target: float | None
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "-"
        return "PASS" if self.seconds <= self.target else "FAIL"

    def row(self) -> list[object]:
        target = "-" if self.target is None else f"<= {self.target:g}"
        return [self.name, self.seconds, self.cpu, target, self.verdict, self.note]


def tabmem_command() -> list[str]:
    """The installed ``tabmem`` command beside this interpreter, else the module."""
    script = Path(sys.executable).with_name("tabmem")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tabmem.cli"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tabmem(arguments: list[str], cwd: Path, sentence: str = "", expect: int = 0) -> Run:
    """``tabmem ARGUMENTS`` in ``cwd``, timed; ``sentence``: the first output line holding it
    is timed too. Exits on an unexpected exit status."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONUNBUFFERED="1", COLUMNS="140")
    cpu_before = _children_cpu()
    started = time.perf_counter()
    seen: float | None = None
    lines: list[str] = []
    with subprocess.Popen(
        [*tabmem_command(), *arguments],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if sentence and seen is None and sentence in line:
                seen = time.perf_counter() - started
        status = process.wait()
    run = Run(time.perf_counter() - started, _children_cpu() - cpu_before, seen, "".join(lines))
    print(f"{run.wall:6.2f} s  tabmem {' '.join(arguments)}", file=sys.stderr, flush=True)
    if status != expect:
        print(run.output[-3000:])
        raise SystemExit(f"tabmem {' '.join(arguments)} exited {status}, not {expect}")
    return run


def best(repeats: int, measure: Callable[[], Run]) -> Run:
    """The fastest of ``repeats`` runs: the machine's noise only ever adds time."""
    return min((measure() for _ in range(repeats)), key=lambda run: run.wall)


def helps(work: Path, repeats: int) -> list[Figure]:
    """``tabmem --help`` (target 1 s) and ``tabmem run --help`` (Hydra's, measured only)."""
    top = best(repeats, lambda: tabmem(["--help"], work))
    run = best(repeats, lambda: tabmem(["run", "--help"], work))
    return [
        Figure("tabmem --help", top.wall, top.cpu, 1.0),
        Figure("tabmem run --help", run.wall, run.cpu, None, "Hydra composes the config"),
    ]


def cells(work: Path, repeats: int) -> list[Figure]:
    """The finished cell (skipped) and one reference-model cell on an existing store."""
    outputs = work / "cells"
    memorizer = ["model=oracle-memorizer", "dataset=iris", "test=header", *QUIET]
    tabmem(["run", *memorizer, f"outputs_dir={outputs}"], work)  # the store and its first run

    def finished() -> Run:
        run = tabmem(["run", *memorizer, f"outputs_dir={outputs}"], work)
        if "0 finished, 1 skipped" not in run.output:
            raise SystemExit(f"the finished cell ran again:\n{run.output[-2000:]}")
        return run

    def reference() -> Run:
        store = work / f"reference-{time.monotonic_ns()}"
        shutil.copytree(outputs, store)  # an existing store without the null model's run
        null = ["model=oracle-null", "dataset=iris", "test=header", *QUIET]
        run = tabmem(["run", *null, f"outputs_dir={store}"], work)
        if "1 finished, 0 skipped" not in run.output:
            raise SystemExit(f"the reference cell did not finish:\n{run.output[-2000:]}")
        return run

    skipped, ran = best(repeats, finished), best(repeats, reference)
    return [
        Figure("finished cell (skipped)", skipped.wall, skipped.cpu, 2.0, "oracle-memorizer"),
        Figure("one reference-model cell", ran.wall, ran.cpu, 4.0, "oracle-null, logged"),
    ]


def bad_inputs(work: Path, repeats: int) -> list[Figure]:
    """Seconds to the one sentence of a ragged file and a missing file (on the existing store
    of ``cells``), and of an unknown setting."""
    ragged = work / "bad.csv"
    ragged.write_text(RAGGED)
    figures = []
    for label, path in (("ragged", ragged), ("missing", work / "missing.csv")):
        arguments = [
            *("run", "model=oracle-null", "dataset=csv", f"dataset.path={path}"),
            *("dataset.name=bad", "test=header", *QUIET, f"outputs_dir={work / 'cells'}"),
        ]
        runs = [tabmem(arguments, work, "Dataset 'bad'", expect=1) for _ in range(repeats)]
        if any(run.seen is None for run in runs):
            raise SystemExit(f"no failure sentence for the {label} file:\n{runs[0].output}")
        said = min(runs, key=lambda run: run.seen or 0.0)
        note = f"said before the cell starts; ends at {said.wall:.1f} s (nothing logged)"
        figures.append(
            Figure(f"bad data file ({label}): sentence", said.seen or 0.0, said.cpu, 2.0, note)
        )
    arguments = ["run", "model=oracle-null", "test.num_queries=abc", f"outputs_dir={work / 'o'}"]
    unknown = best(repeats, lambda: tabmem(arguments, work, expect=1))
    sentence = next((line for line in unknown.output.splitlines() if "num_queries" in line), "")
    note = sentence.strip()[:64]
    figures.append(Figure("setting test.num_queries=abc", unknown.wall, unknown.cpu, 1.0, note))
    return figures


def demo(work: Path, repeats: int, smoke: bool) -> Figure:
    """The demo grid the second time, every cell finished (the first pass is not timed)."""
    outputs = work / "demo"
    size = DEMO_SMOKE if smoke else []
    arguments = ["run", "+grid=demo", *QUIET, f"outputs_dir={outputs}", *size]
    first = tabmem(arguments, work)

    def again() -> Run:
        run = tabmem(arguments, work)
        if not re.search(r"^0 finished, \d+ skipped, 0 failed", run.output, re.MULTILINE):
            raise SystemExit(f"the finished demo grid ran cells again:\n{run.output[-2000:]}")
        return run

    done = best(repeats, again)
    note = f"{1 if smoke else 4} cells, model not loaded; first pass {first.wall:.0f} s"
    return Figure("demo grid, all finished", done.wall, done.cpu, 5.0, note)


def write_markdown(out: Path, rows: list[list[object]], repeats: int, load: str) -> None:
    """The table as Markdown, for docs/reliability.md to link."""
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Start-up figures (`scripts/bench_startup.py`)",
        "",
        f"Wall seconds of a fresh `tabmem` process, best of {repeats}, and the CPU seconds of "
        f"that run (with its workers), on {os.cpu_count()} cores; load average before: {load}. "
        "Written by `make bench`.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    for row in rows:
        cells = [f"{v:.2f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--out",
        type=Path,
        help="Markdown table (default: outputs/bench/startup.md; startup-smoke.md with --smoke)",
    )
    add_smoke_flag(parser)
    args = parser.parse_args()
    repeats = 1 if args.smoke else args.repeats
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="tabmem-startup-") as tmp:
        work = Path(tmp)
        figures = [*helps(work, repeats), *cells(work, repeats), *bad_inputs(work, repeats)]
        figures.append(demo(work, repeats, args.smoke))
    rows = [figure.row() for figure in figures]
    title = f"7. start-up, best of {repeats} (wall seconds; load average before: {load})"
    print_table(title, HEADERS, rows)
    out = args.out or ROOT / "outputs" / "bench" / f"startup{'-smoke' if args.smoke else ''}.md"
    write_markdown(out, rows, repeats, load)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
