"""hydra/launcher=ray joins a running Ray cluster: `ray start --head` on this machine, and a
4-cell grid runs on it through hydra.launcher.ray.init.address (slow)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ENV, ROOT, assert_memorizer_and_null_cells, run_tabmem

RAY = ROOT / ".venv" / "bin" / "ray"
DATASETS = ("iris", "wine")
pytestmark = pytest.mark.slow


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def ray_head(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The address of a one-node Ray cluster with 2 CPUs, started for this test and stopped
    after it. `ray start --block` stays in the foreground, so stopping that one process stops
    this cluster's daemons and no other Ray on the machine (as `ray stop` would)."""
    if not RAY.exists():
        pytest.fail(f"{RAY} is missing: make install puts Ray into .venv")
    port = free_port()
    # A short folder of its own: Ray's socket paths must stay under 108 characters.
    temp = Path(tempfile.mkdtemp(prefix="ray-"))
    log = temp / "head.log"
    command = [
        str(RAY), "start", "--head", "--block", "--num-cpus=2", f"--port={port}",
        f"--dashboard-agent-listen-port={free_port()}",
        "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}",
    ]  # fmt: skip
    # Ray's token authentication off on both sides: this head and the sweeps that join it.
    monkeypatch.setitem(ENV, "RAY_AUTH_MODE", "disabled")
    env = {**ENV, "PYTHONPATH": str(ROOT / "src")}
    with log.open("w") as out:
        head = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            assert head.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        head.terminate()
        head.wait(timeout=60)
        shutil.rmtree(temp, ignore_errors=True)


def test_a_grid_runs_on_a_running_ray_cluster(tmp_path: Path, ray_head: str) -> None:
    result = run_tabmem(
        tmp_path,
        "-m",
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_head}",
        "model=oracle-memorizer,oracle-null",
        f"dataset={','.join(DATASETS)}",
        "test=header",
        "experiment=ray-test",
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Connecting to existing Ray cluster at address: " in result.stderr
    assert "Ray Launcher is launching 4 jobs" in result.stderr + result.stdout

    assert_memorizer_and_null_cells(tmp_path, "ray-test", DATASETS)
