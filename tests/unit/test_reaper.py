"""A grid's reaper that starts only after its launcher died still kills what it left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tabmem.reaper import PROC, mark

pytestmark = pytest.mark.skipif(not PROC.is_dir(), reason="the reaper reads /proc (Linux)")

LAUNCHER = (
    "import subprocess, sys\n"
    "worker = subprocess.Popen(['sleep', '60'])\n"
    "print(worker.pid, flush=True)\n"
    "sys.stdin.readline()\n"
)


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_reaper_started_after_its_launcher_died_kills_the_orphan_by_the_mark():
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    worker = int(launcher.stdout.readline())
    marked = mark(launcher.pid)
    assert marked is not None and marked[0] == str(launcher.pid)  # its own group
    launcher.stdin.close()
    launcher.wait(timeout=30)  # dead before any reaper looked, its worker orphaned
    try:
        assert alive(worker)
        reaper = subprocess.run(
            [sys.executable, "-m", "tabmem.reaper", str(launcher.pid), *map(str, marked)],
            input=b"",  # the launcher's pipe, closed: it died without saying the grid is over
            timeout=60,
        )
        assert reaper.returncode == 0
        deadline = time.monotonic() + 10
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(worker)
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)


def test_without_the_mark_a_late_reaper_finds_no_launcher_and_kills_nothing():
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        done = subprocess.Popen([sys.executable, "-c", "pass"])
        done.wait(timeout=30)
        reaper = subprocess.run(
            [sys.executable, "-m", "tabmem.reaper", str(done.pid)], input=b"", timeout=60
        )
        assert reaper.returncode == 0 and alive(sleeper.pid)
        assert mark(done.pid) is None
    finally:
        sleeper.kill()
        sleeper.wait()
