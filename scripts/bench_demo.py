"""Benchmark 4: ``make demo`` end to end on a fresh ``.venv``, and the two install sets.

The working tree (tracked files and untracked ones git does not ignore; no ``.venv``, no
``outputs``) is copied to two temporary folders. In the first, ``make demo`` runs on a new
virtual environment (it installs the demo's set, ``make install-demo``, then runs the grid);
in the second, ``make install`` installs the full set (tests, transformers and torch, Ray,
Slurm), which is what ``make demo`` installed before the two sets were split. pip's own caches
(its wheel cache, which holds the llama-cpp-python wheel built on an earlier install, and its
HTTP cache) are used as on any machine that installed once before: a first install ever also
compiles llama.cpp.

    python scripts/bench_demo.py [--keep]
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

ROOT = Path(__file__).resolve().parents[1]


def copy_tree(target: Path) -> int:
    """Copy the files git would ship (tracked, or untracked and not ignored) into ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    count = 0
    for raw in filter(None, listed):
        source = ROOT / os.fsdecode(raw)
        if source.is_file():
            destination = target / os.fsdecode(raw)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
            count += 1
    return count


def timed_make(target: str, folder: Path) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(
        ["make", target], cwd=folder, capture_output=True, text=True, env=_clean_env()
    )
    return time.perf_counter() - started, done


def _clean_env() -> dict[str, str]:
    """The environment without this process's virtual environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def pip_cache() -> str:
    found = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True
    )
    return found.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = parser.parse_args()
    folders = [Path(tempfile.mkdtemp(prefix=f"tabmem-{name}-")) for name in ("demo", "full")]
    try:
        files = [copy_tree(folder) for folder in folders]
        print(f"4. make demo on a fresh .venv: {files[0]} files copied to {folders[0]}")
        print(f"pip caches reused (wheel cache and HTTP cache under {pip_cache()})")
        demo_install_s = timed_or_fail("install-demo", folders[0])
        demo_s, demo = timed_make("demo", folders[0])
        print("\n".join(demo.stdout.splitlines()[-12:]))
        if demo.returncode != 0:
            print(demo.stderr[-3000:])
            raise SystemExit(f"make demo failed after {demo_s:.0f} s")
        full_install_s = timed_or_fail("install", folders[1])
        print(f"make install-demo (fresh .venv, the demo's set): {demo_install_s:.1f} s")
        print(f"make install (fresh .venv, the full set):       {full_install_s:.1f} s")
        print(f"demo's set / full set install time: {demo_install_s / full_install_s:.2f}")
        print(f"make demo (the demo grid, .venv ready): {demo_s:.1f} s")
        print(f"make demo end to end on a fresh .venv: {demo_install_s + demo_s:.1f} s")
    finally:
        for folder in folders:
            if args.keep:
                print(f"kept {folder}")
            else:
                shutil.rmtree(folder, ignore_errors=True)


def timed_or_fail(target: str, folder: Path) -> float:
    """Seconds ``make target`` took in ``folder``; the benchmark stops if it failed."""
    seconds, done = timed_make(target, folder)
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-3000:])
        raise SystemExit(f"make {target} failed after {seconds:.0f} s")
    return seconds


if __name__ == "__main__":
    main()
