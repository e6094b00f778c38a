"""A grid's reaper: the processes a grid's launcher started die with it.

Killed by its pid alone (``kill -9 $!``), a launcher leaves its joblib workers to another
parent. A worker running a cell stops itself (``runner.die_with_launcher``), but one still
starting, or between cells, has nothing watching and waits minutes for work that never comes.
So at the start of a grid the launcher starts this small process (``GridReaper``, a Hydra
callback), which notes the launcher's living descendants five times a second; when the launcher
dies without writing that the grid is over, the reaper kills every process it noted and ends.
Linux only (it reads ``/proc``); elsewhere no reaper starts.

    python -m tabmem.reaper <launcher pid> <its group> <its start>   # its stdin a pipe
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

PROC = Path("/proc")
DONE = b"done\n"


def _fields(entry: Path) -> list[str] | None:
    """The ``stat`` fields of the process ``entry`` (``/proc/<pid>``) after its name (state
    first, then parent, process group …; the start time is field 19 of these), or None when
    it ended."""
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def _stats() -> dict[int, list[str]]:
    """Each living process's ``_fields``."""
    found = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (fields := _fields(entry)) and fields[0] != "Z":
            found[int(entry.name)] = fields
    return found


def descendants(root: int) -> set[int]:
    """The pids of ``root``'s living descendants, read from ``/proc``."""
    children: dict[int, list[int]] = {}
    for pid, fields in _stats().items():
        children.setdefault(int(fields[1]), []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def orphans(group: str, since: int) -> set[int]:
    """Processes handed to init (parent 1) in process group ``group`` that started at
    ``since`` (clock ticks after boot) or later: children of a launcher that died before the
    last look noted them."""
    return {
        pid
        for pid, fields in _stats().items()
        if fields[1] == "1" and fields[2] == group and int(fields[19]) >= since
    }


def mark(pid: int) -> tuple[str, int] | None:
    """``pid``'s process group and start time (clock ticks after boot), or None if it ended."""
    fields = _fields(PROC / str(pid))
    return (fields[2], int(fields[19])) if fields else None


def handed_over(launcher: int, timeout_s: float = 10.0) -> None:
    """Wait until this process's parent is no longer ``launcher``. A dying process closes its
    files (the reaper's pipe) before the kernel hands its children to init, so orphans read at
    once can still show the launcher as their parent (seen: the reaper found none and the loky
    workers lived on). The reaper is one of those children, handed over in the same step."""
    deadline = time.monotonic() + timeout_s
    while os.getppid() == launcher and time.monotonic() < deadline:
        time.sleep(0.01)


def watch(launcher: int, marked: tuple[str, int] | None = None, poll_s: float = 0.2) -> set[int]:
    """Note the launcher's descendants until its pipe on stdin says the grid is over (then
    kill nothing) or closes without saying so (the launcher died: once its children are handed
    over, kill those last noted, and its orphans); the pids killed. ``marked`` is the
    launcher's ``mark``, as it passed it: a reaper that starts after its launcher died (a
    loaded machine, a launcher killed at once) still finds the orphans by it."""
    me, noted, said = os.getpid(), set(), b""
    marked = marked or mark(launcher)
    if marked is None:
        return set()
    group, since = marked
    while True:
        ready, _, _ = select.select([0], [], [], poll_s)
        if ready:
            chunk = os.read(0, 64)
            said += chunk
            if DONE in said:
                return set()
            if not chunk:
                break
        noted = descendants(launcher) - {me}  # the living ones only: no pid reused meanwhile
    handed_over(launcher)
    killed = set()
    for pid in noted | (orphans(group, since) - {me}):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        except OSError:  # ended already
            pass
    return killed


_REAPERS: list[subprocess.Popen[bytes]] = []
"""This process's running reapers: kept here, not on the callback, which joblib pickles."""


class GridReaper(Callback):
    """Hydra callback: a reaper for the launcher of each grid (``-m``), told when it ends."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        if not PROC.is_dir():
            return
        group, since = mark(os.getpid()) or ("", 0)
        reaper = subprocess.Popen(
            [sys.executable, "-m", "tabmem.reaper", str(os.getpid()), group, str(since)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the grid's group leaves it to clean up
        )
        _REAPERS.append(reaper)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        while _REAPERS:
            reaper = _REAPERS.pop()
            if reaper.stdin is not None:
                reaper.stdin.write(DONE)
                reaper.stdin.close()
            reaper.wait(timeout=30)


if __name__ == "__main__":
    given = (sys.argv[2], int(sys.argv[3])) if len(sys.argv) == 4 and sys.argv[2] else None
    watch(int(sys.argv[1]), given)
