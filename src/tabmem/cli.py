"""The ``tabmem`` command: ``tabmem run …``, ``tabmem rescore …``, ``tabmem tables …``.

Each subcommand is the entry point it names, with the same arguments: ``run`` is
``python run.py`` (Hydra overrides, ``-m`` for a grid, ``--help``), ``rescore`` is
``python -m tabmem.rescore``, ``tables`` is ``scripts/paper_tables.py`` and ``calibration`` is
``scripts/calibration_table.py``. They run from the repository the package was installed from
(``pip install -e .``; ``$TABMEM_ROOT`` points elsewhere), where the configs and data live.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Callable, Sequence

from tabmem.paths import project_root

SCRIPTS = {
    "run": ("run.py", "one cell or a grid (Hydra overrides; -m for a grid; --help)"),
    "tables": ("scripts/paper_tables.py", "the papers' tables and figures from an MLflow store"),
    "calibration": ("scripts/calibration_table.py", "false- and true-positive rates per test"),
}
USAGE = "usage: tabmem {run,rescore,tables,calibration} [arguments …]"


def _help() -> str:
    lines = [USAGE, "", "commands:"]
    for name, (_, what) in SCRIPTS.items():
        lines.append(f"  {name:<12} {what}")
    lines.append(f"  {'rescore':<12} score recorded answers (a file or a published folder)")
    lines.append("")
    lines.append("tabmem COMMAND --help shows the command's own options.")
    return "\n".join(lines)


def _run_script(relative: str, command: str, arguments: Sequence[str]) -> int:
    """Run a repository script as ``__main__`` with ``arguments``; its exit status back."""
    path = project_root() / relative
    if not path.is_file():
        print(
            f"tabmem {command}: {path} is missing; install tabmem from its repository "
            "(pip install -e .) or set TABMEM_ROOT to the repository.",
            file=sys.stderr,
        )
        return 2
    sys.argv = [str(path), *arguments]
    return _status(lambda: runpy.run_path(str(path), run_name="__main__"))


def _status(call: Callable[[], object]) -> int:
    """Call an entry point; its return or exit status as an int (argparse's --help exits 0)."""
    try:
        returned = call()
    except SystemExit as exit_:
        returned = exit_.code
    if returned is None or isinstance(returned, dict):
        return 0
    return returned if isinstance(returned, int) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``tabmem COMMAND …`` to the entry point that COMMAND names."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help", "help"):
        print(_help())
        return 0 if arguments else 2
    command, rest = arguments[0], arguments[1:]
    if command == "rescore":
        from tabmem.rescore.cli import main as rescore

        return _status(lambda: rescore(rest))
    if command in SCRIPTS:
        return _run_script(SCRIPTS[command][0], command, rest)
    print(f"tabmem: unknown command '{command}'.\n{_help()}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
