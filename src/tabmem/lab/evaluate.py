"""The lab's tests as a real Hydra sweep: every checkpoint × dataset × test, one MLflow run each.

The sweep is ``tabmem run -m`` like any grid (called in this process through the function the
lab is given), so each cell is tracked, cached and skipped on a re-run exactly as elsewhere;
the lab's checkpoints are found through Hydra's search path.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

from tabmem.errors import TabmemError

# ``tabmem run``'s arguments in, its exit status out (``tabmem.main.run``).
Sweep = Callable[[Sequence[str]], int]


def sweep_command(
    models: Sequence[str],
    datasets: Sequence[str],
    tests: Sequence[str],
    conf_root: Path,
    outputs_dir: Path,
    experiment: str,
    overrides: Sequence[str] = (),
    jobs: int = 1,
    seeds: Sequence[int] = (0,),
) -> list[str]:
    """The ``tabmem run`` arguments of the multirun that evaluates the lab at each of
    ``seeds`` (the rows sampled, the twin drawn), ``jobs`` cells at once (each job holds its own
    copy of a checkpoint)."""
    return [
        "-m",
        f"hydra.searchpath=[file://{conf_root.resolve()}]",
        f"model={','.join(models)}",
        f"dataset={','.join(datasets)}",
        f"test={','.join(tests)}",
        f"experiment={experiment}",
        f"seed={','.join(str(s) for s in seeds)}",
        f"outputs_dir={outputs_dir.resolve()}",
        f"hydra.launcher.n_jobs={jobs}",
        "progress=false",
        "show_queries=false",
        *overrides,
    ]


@contextmanager
def _output_into(log_file: Path) -> Iterator[None]:
    """This process's standard output and error (its streams and its file descriptors, which
    worker processes inherit) into ``log_file``; logging handled as before afterwards (the
    sweep configures its own handlers)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log_file.open("w", buffering=1) as handle:
        os.dup2(handle.fileno(), 1)
        os.dup2(handle.fileno(), 2)
        try:
            with redirect_stdout(handle), redirect_stderr(handle):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            root.handlers[:] = handlers
            root.setLevel(level)


def run_sweep(sweep: Sweep, arguments: Sequence[str], log_file: Path) -> None:
    """Run the sweep (output into ``log_file``); a failed sweep stops the lab with one sentence."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with _output_into(log_file):
        status = sweep(list(arguments))
    if status != 0:
        raise TabmemError(f"The lab's evaluation sweep failed (exit {status}); see {log_file}.")
