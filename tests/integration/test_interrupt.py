"""Ctrl-C in the middle of a grid (issue 56): a line or two that say what is kept and how to go
on, exit status 130, no traceback; the same command again says how many finished cells it
resumes from and runs the rest.

Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the launcher, its
joblib workers and their MLflow helpers. The test starts the grid in its own group and signals
the group while the second cell's requests are held by the server, after the first cell's run
is in the store.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from flaky_grid import ROOT, sweep_command, sweep_env, write_model_config
from flaky_server import FlakyServer
from harness import seed_store

from tabmem.data import dataset_specs, load_dataset

GRID = ("-m", "model=slow", "dataset=iris,titanic", "test=header", "hydra.launcher.n_jobs=1")
HEADER_QUERIES = 4  # conf/test/header.yaml: split_rows
EXPERIMENT = "interrupt"


def _finished_runs(db: Path) -> int:
    """The grid's FINISHED runs (not the report page's, which has its own experiment)."""
    if not db.exists():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as connection:
        return connection.execute(
            "SELECT count(*) FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id "
            "WHERE r.status = 'FINISHED' AND e.name = ?",
            (EXPERIMENT,),
        ).fetchone()[0]


def _as_in_a_terminal() -> None:
    """A terminal's foreground job takes Ctrl-C; a suite started in the background of a
    non-interactive shell (``make test &``, nohup) has SIGINT ignored, and an ignored signal
    stays ignored across exec, so the grid would never see it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_ctrl_c_says_what_is_kept_and_the_same_command_resumes(tmp_path: Path) -> None:
    specs = dataset_specs()
    datasets = [load_dataset(specs[name]) for name in ("iris", "titanic")]
    conf, outputs = tmp_path / "conf", tmp_path / "outputs"
    seed_store(outputs / "mlflow.db")
    command = sweep_command(outputs, conf, EXPERIMENT, *GRID)
    with FlakyServer(datasets) as server:
        # the first cell (iris) is answered; the second one's requests wait
        server.hold_after(HEADER_QUERIES)
        write_model_config(conf, "slow", server.base_url, max_concurrency=1, timeout=120)
        grid = subprocess.Popen(
            command,
            cwd=ROOT,
            env=sweep_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group: signalled as a terminal's Ctrl-C would
            preexec_fn=_as_in_a_terminal,
        )
        try:
            ready = _wait_for(
                lambda: server.held() >= 1 and _finished_runs(outputs / "mlflow.db") == 1, 300
            )
            assert ready, "the grid never reached its second cell"
            os.killpg(grid.pid, signal.SIGINT)
            out, err = grid.communicate(timeout=60)
        finally:
            server.release()
            if grid.poll() is None:
                os.killpg(grid.pid, signal.SIGKILL)
        assert grid.returncode == 130, out + err
        said = out + err
        assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
        assert err.strip().splitlines()[-1] == (
            "run.py: Interrupted; 1 of 2 cells finished are kept, with every answer received so "
            "far; run the same command again to resume the rest."
        )
        assert len([line for line in err.splitlines() if line.strip()]) <= 2
        asked = server.request_count

        again = subprocess.run(
            command, cwd=ROOT, env=sweep_env(), capture_output=True, text=True, timeout=600
        )
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        "Resuming: 1 of 2 cells finished in an earlier run and are kept (force=true runs them "
        "again); 1 to run." in again.stdout
    )
    assert _finished_runs(outputs / "mlflow.db") == 2
    assert server.request_count - asked <= HEADER_QUERIES  # the first cell is not asked again
