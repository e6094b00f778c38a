"""A grid killed by its launcher's pid while its joblib workers are still starting (issue 40,
item 1, as a loaded machine times it): the workers have no cell yet, so nothing in them watches
the launcher, and they would wait minutes for work that never comes. The grid's reaper kills
them within seconds, and ends itself."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from flaky_grid import ROOT, sweep_command, sweep_env


def _processes() -> dict[int, tuple[int, str]]:
    """Every living process (zombies are dead): pid → (process group, command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            found[int(entry.name)] = (int(fields[2]), command)
    return found


def _of_grid(launcher: int) -> list[str]:
    """The launcher's process group and its reaper, still alive, as ``pid command`` lines."""
    return [
        f"{pid} {command[:120]}"
        for pid, (group, command) in _processes().items()
        if group == launcher or command.endswith(f"-m tabmem.reaper {launcher}")
    ]


def _workers(launcher: int) -> list[int]:
    return [
        pid
        for pid, (group, command) in _processes().items()
        if group == launcher and "popen_loky_posix" in command
    ]


def _wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_workers_killed_before_their_first_cell_die_with_the_launcher(tmp_path: Path) -> None:
    command = sweep_command(
        tmp_path / "outputs", None, "kill-early", "-m", "model=oracle-null",
        "dataset=iris,titanic", "test=header", "hydra.launcher.n_jobs=2",
    )  # fmt: skip
    launcher = subprocess.Popen(
        command,
        cwd=ROOT,
        env=sweep_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own group, to find (and at the end clear) its workers
    )
    try:
        assert _wait_for(lambda: len(_workers(launcher.pid)) >= 2, 300), "no worker started"
        os.kill(launcher.pid, signal.SIGKILL)  # the launcher only, as `kill -9 $!` does
        launcher.wait(timeout=30)
        _wait_for(lambda: _of_grid(launcher.pid) == [], 5)
        assert _of_grid(launcher.pid) == [], "processes of the grid outlived its launcher"
    finally:
        for line in _of_grid(launcher.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)
