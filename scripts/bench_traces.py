"""What logging every query as an MLflow trace costs, per query, against a cached query.

A cell of N chat queries (prompts of about 2 KB, like the header test's) is answered twice by
a model behind the response cache; the second pass, all cache hits, is the cost of a cached
query. The same cell is then logged as an MLflow run without traces and with them (fresh
SQLite store each time); the difference per query is the cost of a trace.

Then what a researcher sees: a grid re-run from the response cache (the four oracles'
memorization suite on the six datasets, 96 cells), once with ``tracking.traces=false`` and once
with traces, side by side with the same cache; the wall-time ratio is what traces add to a
cached grid.

    python scripts/bench_traces.py [N]      # default N = 200
    python scripts/bench_traces.py --smoke  # N = 10, one header cell run in this process

The figures are printed and written to ``outputs/bench/traces.md`` (``--out``;
``traces-smoke.md`` at the smoke size), which docs/ui.md links.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import ROOT, add_smoke_flag

from tabmem.llm.base import BaseBackend, GenerationParams, Message, Request
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.results import QueryRecord
from tabmem.tracking.runs import load_runs
from tabmem.tracking.store import TrackingStore
from tabmem.tracking.traces import QueryLog

ROW = "5.1,3.5,1.4,0.2,Iris-setosa\n"


class _Echo(BaseBackend):
    """A backend that answers at once: only the first pass calls it."""

    def __init__(self) -> None:
        self.identity = {"provider": "bench-echo"}

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        return ROW * 5

    def complete(self, prompt: str, params: GenerationParams) -> str:
        return ROW * 5


def _requests(n: int) -> list[Request]:
    params = GenerationParams(max_tokens=200)
    return [
        Request(params=params, messages=({"role": "user", "content": f"{i}\n" + ROW * 70},))
        for i in range(n)
    ]


def _log(folder: Path, records: list[QueryRecord], log: QueryLog | None) -> float:
    store = TrackingStore(
        uri=f"sqlite:///{folder / 'mlflow.db'}",
        artifact_root=folder / "artifacts",
        experiment="bench",
        lock_path=folder / "mlflow.lock",
    )
    started = time.perf_counter()
    store.log_cell(
        "bench",
        {"test": "header"},
        {"n": len(records)},
        {"n_queries": len(records)},
        {},
        {},
        failed=False,
        queries=log,
    )
    return time.perf_counter() - started


def main(n: int) -> list[str]:
    """The logged cell's figures, as printed lines."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cache = ResponseCache(folder / "cache.sqlite")
        model = LanguageModel(_Echo(), "echo", cache=cache, show_progress=False)
        requests = _requests(n)
        model.run(requests)
        model.answered.clear()
        started = time.perf_counter()
        responses = model.run(requests)
        cached = time.perf_counter() - started
        assert all(r.cached for r in responses)
        records = [
            QueryRecord(r.as_text(), ROW * 5, a.text, 5.0)
            for r, a in zip(requests, responses, strict=True)
        ]
        tags = {"model": "echo", "dataset": "iris", "test": "header", "transform": "original"}
        log = QueryLog(records, tags, (time.time_ns(), time.time_ns()), list(model.answered))
        _log(folder / "warm", records, log)  # the first log pays MLflow's imports: not timed
        plain = _log(folder / "plain", records, None)
        traced = _log(folder / "traced", records, log)
        cache.close()
    per = 1000 / n
    return [
        f"{n} queries",
        f"cached query                  {cached * per:8.2f} ms/query",
        f"run logged without traces     {plain * 1000:8.0f} ms",
        f"run logged with traces        {traced * 1000:8.0f} ms",
        f"trace (expectation, feedback) {(traced - plain) * per:8.2f} ms/query",
    ]


GRID = (
    "model=oracle-memorizer,oracle-learner,oracle-marginal,oracle-null",
    "dataset=iris,titanic,adult,wine,openml-diabetes,california-housing",
    "test=memorization",
)
SMOKE_GRID = ("model=oracle-memorizer", "dataset=iris", "test=header")


def _grid(grid: tuple[str, ...], outputs: Path, traces: bool, in_process: bool) -> float:
    """Wall seconds of the grid run into ``outputs`` (whose cache may already answer it), by
    ``python run.py -m`` or (``in_process``) by ``tabmem.grid`` in this process."""
    started = time.perf_counter()
    if in_process:
        from tabmem.api import grid as run_grid

        groups = {k: v.split(",") for k, v in (item.split("=", 1) for item in grid)}
        run_grid(
            groups["model"],
            groups["dataset"],
            groups["test"],
            quiet=True,
            outputs_dir=str(outputs),
            progress=False,
            show_queries=False,
            tracking__traces=traces,
        )
        return time.perf_counter() - started
    subprocess.run(
        [
            sys.executable,
            "run.py",
            "-m",
            *grid,
            "progress=false",
            "show_queries=false",
            f"outputs_dir={outputs}",
            f"tracking.traces={str(traces).lower()}",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def cached_grid(grid: tuple[str, ...], in_process: bool = False) -> list[str]:
    """The same cached grid without and with traces, side by side, as printed lines."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _grid(grid, folder / "fill", False, in_process)
        for name in ("plain", "traced"):
            shutil.copytree(folder / "fill" / "cache", folder / name / "cache")
        plain = _grid(grid, folder / "plain", False, in_process)
        traced = _grid(grid, folder / "traced", True, in_process)
        runs = load_runs(f"sqlite:///{folder / 'traced' / 'mlflow.db'}")
        queries = int(runs["metric.n_queries"].sum())
    return [
        f"cached grid ({' '.join(grid)}): {len(runs)} cells, {queries} queries",
        f"without traces                {plain:8.1f} s",
        f"with traces                   {traced:8.1f} s",
        f"with / without                {traced / plain:8.2f}",
        f"trace, in the grid            {(traced - plain) * 1000 / queries:8.2f} ms/query",
    ]


def write_markdown(out: Path, lines: list[str], load: str) -> None:
    """The figures as Markdown, for docs/ui.md to link."""
    out.parent.mkdir(parents=True, exist_ok=True)
    head = [
        "# What traces cost (`scripts/bench_traces.py`)",
        "",
        f"On {os.cpu_count()} cores; load average before: {load}. Written by `make bench`.",
        "",
    ]
    out.write_text("\n".join([*head, "```", *lines, "```"]) + "\n", encoding="utf-8")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=200, help="queries of the logged cell")
    parser.add_argument(
        "--out",
        type=Path,
        help="the figures as Markdown (default: outputs/bench/traces.md; traces-smoke.md with "
        "--smoke)",
    )
    add_smoke_flag(parser)
    args = parser.parse_args()
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    lines = main(10 if args.smoke else args.n)
    lines += ["", *cached_grid(SMOKE_GRID if args.smoke else GRID, in_process=args.smoke)]
    print("\n".join(lines))
    out = args.out or ROOT / "outputs" / "bench" / f"traces{'-smoke' if args.smoke else ''}.md"
    write_markdown(out, lines, load)
    print(f"written: {out}")
