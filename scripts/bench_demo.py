"""Benchmark 4: the first run from nothing, ``make demo`` on a fresh copy with no pip cache.

The working tree (tracked files and untracked ones git does not ignore; no ``.venv``, no
``outputs``) is copied to a temporary folder, as a fresh clone would give it. ``make demo``
runs there with pip's caches off (``PIP_NO_CACHE_DIR=1``: every package is downloaded and
nothing built earlier is reused) and no compiler (``CC=false CXX=false``: a package built from
source in C or C++ fails it), split into its two steps: ``make install-demo`` (a new
virtual environment with the demo's set: the core, the prebuilt llama.cpp engine and the
SmolLM2 weights) and the demo grid itself. ``--full`` also times ``make install`` (the set
``make test`` needs: torch, transformers, Ray, Slurm) from nothing in a second copy. Python may
write bytecode there, as on a user's machine (``PYTHONDONTWRITEBYTECODE`` is lifted): the demo's
set installs with ``--no-compile`` and is compiled once, at its first import.

It prints the seconds of each step and the demo's prompt tokens against those llama.cpp
evaluated (the prefix its KV cache held is not evaluated again), and writes them to
``outputs/bench/demo.md`` (``--out``), which docs/reliability.md links.

    python scripts/bench_demo.py [--full] [--keep]
    python scripts/bench_demo.py --smoke   # the copy and ``make -n demo`` only (seconds)

A fresh virtual environment filled from the package index cannot be made smaller, so
``--smoke`` (``TABMEM_BENCH_SMOKE=1``) copies the tree and has make list, without running
them, the commands ``make demo`` would run there; it says that it skipped the rest.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOKE_ENV = "TABMEM_BENCH_SMOKE"  # as in bench_common, which imports the package: this script
# needs only the standard library
DROPPED = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
# The demo's spend line: "… for 38,539 prompt and 921 completion tokens (…); 11,092 tokens
# evaluated by local models."
SPEND = re.compile(
    r"for (?P<prompt>[\d,]+) prompt and (?P<completion>[\d,]+) completion tokens.*?"
    r"(?P<evaluated>[\d,]+) tokens\s+evaluated",
    re.DOTALL,
)


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


def timed_make(
    target: str, folder: Path, *options: str
) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(
        ["make", *options, target], cwd=folder, capture_output=True, text=True, env=_clean_env()
    )
    return time.perf_counter() - started, done


def _clean_env() -> dict[str, str]:
    """The environment without this process's virtual environment, with pip's caches off and
    no C or C++ compiler (a package that would need one fails the benchmark), and Python free
    to write bytecode as on a user's machine (the demo's set installs with ``--no-compile``)."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env.update(PIP_NO_CACHE_DIR="1", CC="false", CXX="false")
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="also time make install")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copies")
    parser.add_argument(
        "--smoke",
        action="store_true",
        default=os.environ.get(SMOKE_ENV, "") not in ("", "0"),
        help=f"copy the tree and list make demo's commands only (also {SMOKE_ENV}=1)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "outputs" / "bench" / "demo.md",
        help="the figures as Markdown (default: outputs/bench/demo.md)",
    )
    args = parser.parse_args()
    names = ("demo", "full") if args.full and not args.smoke else ("demo",)
    folders = [Path(tempfile.mkdtemp(prefix=f"tabmem-{name}-")) for name in names]
    try:
        files = [copy_tree(folder) for folder in folders]
        print(f"4. make demo from nothing: {files[0]} files copied to {folders[0]}, no pip cache")
        if args.smoke:
            smoke(folders[0])
            return
        install_s = timed_or_fail("install-demo", folders[0])
        demo_s, demo = timed_make("demo", folders[0])
        print("\n".join(demo.stdout.splitlines()[-12:]))
        if demo.returncode != 0:
            print(demo.stderr[-3000:])
            raise SystemExit(f"make demo failed after {demo_s:.0f} s")
        total = install_s + demo_s
        lines = [
            f"make install-demo (fresh .venv, no pip cache): {install_s:.1f} s",
            f"the demo grid (.venv ready):                    {demo_s:.1f} s",
            f"make demo from nothing, end to end:             {total:.1f} s (target 150 s)",
            token_line(demo.stdout),
        ]
        if args.full:
            full_s = timed_or_fail("install", folders[1])
            lines.append(f"make install (fresh .venv, no pip cache, the full set): {full_s:.1f} s")
        print("\n".join(lines))
        write_markdown(args.out, lines)
        print(f"written: {args.out}")
    finally:
        for folder in folders:
            if args.keep:
                print(f"kept {folder}")
            else:
                shutil.rmtree(folder, ignore_errors=True)


def write_markdown(out: Path, lines: list[str]) -> None:
    """The figures as Markdown, for docs/reliability.md to link."""
    out.parent.mkdir(parents=True, exist_ok=True)
    header = [
        "# `make demo` from nothing (`scripts/bench_demo.py`)",
        "",
        f"A fresh copy of the tree on {os.cpu_count()} cores, pip's caches off, no compiler; "
        f"load average before the grid: {', '.join(f'{v:.1f}' for v in os.getloadavg())}. "
        "Written by `make bench`.",
        "",
    ]
    out.write_text("\n".join([*header, *(f"    {line}" for line in lines)]) + "\n")


def smoke(folder: Path) -> None:
    """``make -n demo`` in the copy: the commands it would run, none of them run."""
    seconds, done = timed_make("demo", folder, "-n")
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-3000:])
        raise SystemExit("make -n demo failed in the copy")
    commands = [line for line in done.stdout.splitlines() if line.strip()]
    print(f"make -n demo in the copy: {len(commands)} commands listed in {seconds:.1f} s")
    print("smoke: the install and the demo grid skipped (a fresh .venv from the package index)")


def token_line(output: str) -> str:
    """The demo's prompt tokens against those llama.cpp evaluated: every prompt token would be
    evaluated without prefix sharing; with it, only those its KV cache did not hold (plus the
    generated ones, which the evaluated count includes)."""
    found = SPEND.search(output)
    if found is None:
        return "tokens: the demo printed no spend line"
    prompt, completion, evaluated = (int(found[k].replace(",", "")) for k in SPEND.groupindex)
    return (
        f"tokens evaluated by llama.cpp: {evaluated:,} with prefix sharing, of {prompt:,} prompt "
        f"and {completion:,} generated ({prompt + completion:,} without it: "
        f"{evaluated / (prompt + completion):.2f})"
    )


def timed_or_fail(target: str, folder: Path) -> float:
    """Seconds ``make target`` took in ``folder``; the benchmark stops if it failed."""
    seconds, done = timed_make(target, folder)
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-3000:])
        raise SystemExit(f"make {target} failed after {seconds:.0f} s")
    return seconds


if __name__ == "__main__":
    main()
