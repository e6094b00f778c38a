"""Benchmark 5: the demo grid with and without prefix sharing and stopping on divergence.

The demo grid (``run.py +grid=demo``: the embedded model's header test on four datasets) runs
twice on this machine, each time into a fresh temporary outputs folder (no cached answer):

- ``before``: ``test.few_shot_row=null test.stop_on_divergence=false``, the header test as it
  was (few-shot examples cut at each query's own row, generation to ``max_tokens``);
- ``after``: the defaults (examples cut at one row for the whole cell, so consecutive queries
  share their prompt up to the tested file; generation stops at the end of the first wrong line).

For each it prints the wall time and the tokens llama.cpp evaluated (prompt tokens not served
from its KV cache, plus generated tokens), with the prompt and completion tokens and every
cell's verdict; then after/before ratios. ``--repeats`` alternates which goes first.

    python scripts/bench_first_run.py [--repeats 1]
    python scripts/bench_first_run.py --smoke   # iris alone, two short queries per cell
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import ROOT, add_smoke_flag, print_table

SETTINGS = {
    "before": ["test.few_shot_row=null", "test.stop_on_divergence=false"],
    "after": [],
}
TOKENS = ("evaluated_tokens", "prompt_tokens", "completion_tokens")
# --smoke: the demo grid on iris alone, one few-shot example, two queries to the third row.
SMOKE = [
    "hydra.sweeper.params.dataset=iris",
    "test.few_shot=1",
    "test.split_rows=[1,2]",
    "test.n_rows=3",
    "test.few_shot_row=2",
]


def run_grid(overrides: list[str], outputs: Path) -> float:
    """Wall seconds of one demo grid into ``outputs``."""
    command = [
        sys.executable,
        "run.py",
        "+grid=demo",
        f"outputs_dir={outputs}",
        "progress=false",
        "show_queries=false",
        *overrides,
    ]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-3000:])
        raise SystemExit(f"the demo grid failed after {seconds:.0f} s")
    return seconds


def read_cells(outputs: Path) -> tuple[dict[str, float], dict[str, str]]:
    """Summed token counts and each dataset's verdict, from the run's MLflow store (read
    without ``mlflow.set_tracking_uri``, which would send the next grid's runs there)."""
    from tabmem.tracking.runs import load_runs

    runs = load_runs(f"sqlite:///{outputs / 'mlflow.db'}", ["demo"])
    totals = {name: float(runs[f"metric.{name}"].sum()) for name in TOKENS}
    verdicts = dict(zip(runs["dataset"], runs["verdict"], strict=True))
    return totals, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1)
    add_smoke_flag(parser)
    args = parser.parse_args()
    size = SMOKE if args.smoke else []
    walls: dict[str, list[float]] = {name: [] for name in SETTINGS}
    tokens: dict[str, dict[str, float]] = {}
    verdicts: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="tabmem-first-run-") as tmp:
        for repeat in range(args.repeats):
            order = list(SETTINGS) if repeat % 2 else list(reversed(SETTINGS))
            for name in order:
                outputs = Path(tmp) / f"{name}-{repeat}"
                walls[name].append(run_grid([*size, *SETTINGS[name]], outputs))
                tokens[name], verdicts[name] = read_cells(outputs)
    rows = [[name, min(walls[name]), *(int(tokens[name][t]) for t in TOKENS)] for name in SETTINGS]
    cells = len(verdicts["after"])
    print_table(
        f"5. the demo grid ({cells} header cells, smollm2-135m, no cache), best of {args.repeats}",
        ["setting", "wall s", "evaluated tokens", "prompt tokens", "completion tokens"],
        rows,
    )
    wall_ratio = min(walls["after"]) / min(walls["before"])
    token_ratio = tokens["after"]["evaluated_tokens"] / tokens["before"]["evaluated_tokens"]
    print(f"after / before: wall {wall_ratio:.2f}, evaluated tokens {token_ratio:.2f}")
    for dataset, after in sorted(verdicts["after"].items()):
        print(f"{dataset}: before {verdicts['before'][dataset]}, after {after}")


if __name__ == "__main__":
    main()
