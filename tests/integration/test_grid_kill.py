"""A grid killed by its launcher's pid alone (not its process group) leaves nothing running:
the joblib workers that run its cells die with the launcher instead of finishing and logging
their cells behind the user's back."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from flaky_grid import ROOT, sweep_command, sweep_env, write_model_config
from flaky_server import FlakyServer

from tabmem.data import dataset_specs, load_dataset


def _alive_in_group(group: int) -> list[str]:
    """The processes of a process group that are still running (zombies are dead), as
    ``pid command`` lines."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == group and state != "Z":
            alive.append(f"{entry.name} {command}")
    return alive


def _wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_killing_the_launchers_pid_leaves_no_process_of_the_grid(tmp_path: Path) -> None:
    specs = dataset_specs()
    datasets = [load_dataset(specs[name]) for name in ("iris", "titanic")]
    conf, outputs = tmp_path / "conf", tmp_path / "outputs"
    with FlakyServer(datasets) as server:
        # slow: every request waits until released, so both cells are mid-way at the kill
        server.hold_after(0)
        write_model_config(conf, "slow", server.base_url, max_concurrency=1, timeout=120)
        command = sweep_command(
            outputs, conf, "kill", "-m", "model=slow", "dataset=iris,titanic", "test=header"
        )
        launcher = subprocess.Popen(
            [*command, "hydra.launcher.n_jobs=2"],
            cwd=ROOT,
            env=sweep_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own group, to find (and at the end clear) its workers
        )
        group = launcher.pid
        try:
            assert _wait_for(lambda: server.held() >= 2, 300), "the cells never asked the model"
            workers = [p for p in _alive_in_group(group) if not p.startswith(f"{group} ")]
            assert workers, "the grid ran its cells in no worker process"
            os.kill(launcher.pid, signal.SIGKILL)  # the launcher only, as `kill -9 $!` does
            launcher.wait(timeout=30)
            # the workers notice within seconds; 5 s without them dying fails, as before
            _wait_for(lambda: _alive_in_group(group) == [], 5)
            assert _alive_in_group(group) == [], "processes of the grid outlived its launcher"
        finally:
            server.release()
            if _alive_in_group(group):
                os.killpg(group, signal.SIGKILL)
