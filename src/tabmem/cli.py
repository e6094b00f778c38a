"""The ``tabmem`` command: ``tabmem run | rescore | tables | calibration | lab | report | bundle |
tests``.

Every subcommand runs in this process with its own ``--help``: ``run`` is the Hydra entry
point (``tabmem.main``; overrides, ``-m`` for a grid), ``rescore`` scores recorded answers,
``tables`` writes the papers' tables and figures, ``calibration`` the calibration table,
``lab`` runs the contamination lab, ``report`` writes the page of who memorized what,
``bundle`` a grid's reproducibility bundle, and ``tests`` lists the tests. Outputs go to
``./outputs`` of the current folder unless told otherwise. The scripts in the repository's
``scripts/`` are shortcuts to these.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# Before anything imports litellm (it reaches the network at import without the first).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

COMMANDS = {
    "run": "one cell or a grid (Hydra overrides; -m for a grid; --help)",
    "rescore": "score recorded answers (a file or a published folder)",
    "tables": "the papers' tables and figures from an MLflow store",
    "calibration": "false- and true-positive rates per test from an MLflow store",
    "lab": "contamination lab: plant datasets in a small model, measure TPR/FPR",
    "report": "one HTML page: models × datasets, who memorized what, from an MLflow store",
    "bundle": "a finished grid's answers, configs, seeds, data sha256 and verdicts, to recheck",
    "tests": "every test: what its evidence claims, its queries, what it needs of a model",
}
USAGE = f"usage: tabmem {{{','.join(COMMANDS)}}} [arguments …]"
STORE_HELP = "MLflow store to read (default: $MLFLOW_TRACKING_URI, else ./outputs/mlflow.db)"


def _help() -> str:
    lines = [USAGE, "", "commands:"]
    lines += [f"  {name:<12} {what}" for name, what in COMMANDS.items()]
    lines += ["", "tabmem COMMAND --help shows the command's own options."]
    return "\n".join(lines)


def _store(given: str | None) -> str:
    """The MLflow store to read; a SQLite store must exist already (reading creates none)."""
    from tabmem.tracking.store import require_store, tracking_uri

    uri = tracking_uri(given, Path("outputs"))
    require_store(
        uri, "run a grid first (tabmem run +grid=paper model=...) or pass --tracking-uri."
    )
    return uri


def _names(text: str | None) -> list[str] | None:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    return names or None


def tables(arguments: Sequence[str], prog: str = "tabmem tables") -> int:
    """Regenerate the papers' tables and figures from the tracked runs (make paper-tables).

    Reads the MLflow store only; writes Markdown, LaTeX and CSV tables, PNG and PDF figures
    and an ``index.md`` linking them with the runs they came from (docs/paper-tables.md).
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(tables.__doc__ or "").split("\n\n")[0],
        epilog="example: tabmem tables --experiment paper --models gpt-4o,oracle-memorizer",
    )
    parser.add_argument("--tracking-uri", help=STORE_HELP)
    parser.add_argument(
        "--experiment",
        action="append",
        dest="experiments",
        help="MLflow experiment to read; repeat for several (default: all)",
    )
    parser.add_argument(
        "--models",
        help="comma-separated language models to show (default: all; "
        "the baselines are always shown)",
    )
    parser.add_argument(
        "--datasets",
        help="comma-separated dataset rows (default: the paper grid's, then any "
        "other dataset with runs)",
    )
    parser.add_argument(
        "--out", default="outputs/paper", type=Path, help="output folder (default: %(default)s)"
    )
    args = parser.parse_args(arguments)
    from tabmem.errors import TabmemError
    from tabmem.report.paper import write_paper

    started = time.perf_counter()
    try:
        report = write_paper(
            _store(args.tracking_uri),
            args.out,
            args.experiments,
            _names(args.models),
            _names(args.datasets),
        )
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(report.said(time.perf_counter() - started))
    return 0


def calibration(arguments: Sequence[str], prog: str = "tabmem calibration") -> int:
    """Write the calibration table from the tracked runs (make calibrate).

    Reads the ``calibrate`` experiment and the contamination lab's experiments (``lab-*``)
    where the store has them; writes ``calibration.md`` / ``.csv`` (rates of the tests of rows
    seen), ``calibration_groups.*`` (per group of cells) and ``calibration_cells.csv``.
    """
    parser = argparse.ArgumentParser(
        prog=prog, description=(calibration.__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--tracking-uri", help=STORE_HELP)
    parser.add_argument(
        "--out",
        default="outputs/calibration",
        type=Path,
        help="output folder (default: %(default)s)",
    )
    args = parser.parse_args(arguments)
    from tabmem.errors import TabmemError
    from tabmem.report.calibration import write_calibration
    from tabmem.tracking.store import tracking_uri

    try:
        written = write_calibration(tracking_uri(args.tracking_uri, Path("outputs")), args.out)
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print((args.out / "calibration.md").read_text(encoding="utf-8"))
    print(f"Written: {', '.join(str(p) for p in written)}")
    return 0


def lab(arguments: Sequence[str], prog: str = "tabmem lab") -> int:
    """Contamination lab: fine-tune a small model on chosen datasets, then measure each test's
    true-positive rate (planted datasets, by repetitions) and false-positive rate (held out).

    Settings are the lab configs (conf/lab/<setting>.yaml: minimal on CPU in minutes, standard,
    full on a GPU); ``key=value`` arguments override them. The evaluation is a ``tabmem run -m``
    sweep in this process.
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(lab.__doc__ or "").split("\n\n")[0],
        epilog=f"example: {prog} minimal training.method=lora checkpoints=[0,8]",
    )
    parser.add_argument(
        "setting", nargs="?", default="minimal", help="conf/lab/<setting>.yaml (default: minimal)"
    )
    parser.add_argument("overrides", nargs="*", help="key=value changes to the setting")
    parser.add_argument(
        "--outputs-dir", default="outputs", type=Path, help="(default: ./%(default)s)"
    )
    # options may stand anywhere: `tabmem lab full --outputs-dir X key=value`
    args = parser.parse_intermixed_args(arguments)
    from tabmem.errors import TabmemError
    from tabmem.lab.run import run_lab
    from tabmem.main import run

    overrides = list(args.overrides)
    setting = args.setting
    if "=" in setting:
        overrides.insert(0, setting)
        setting = "minimal"
    try:
        outcome = run_lab(setting, overrides, args.outputs_dir, sweep=run)
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    timings = ", ".join(f"{k} {v:.0f} s" for k, v in outcome.seconds.items())
    print(f"Report: {outcome.files['table_md']} and {outcome.files['figure']} ({timings}).")
    return 0


def report(arguments: Sequence[str], prog: str = "tabmem report") -> int:
    """Write one self-contained HTML page of who memorized what (make report).

    Models × datasets, each cell the dataset verdict (else each test's verdict) in colour with
    the numbers behind it, failed cells with their error, each mark a link to its run in the
    MLflow UI; filters by experiment, transform and test; --compare sets two models side by
    side (docs/ui.md).
    """
    parser = argparse.ArgumentParser(prog=prog, description=(report.__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tracking-uri", help=STORE_HELP)
    parser.add_argument(
        "--experiment",
        action="append",
        dest="experiments",
        help="MLflow experiment to show; repeat for several (default: all)",
    )
    parser.add_argument(
        "--ui-url",
        help="MLflow UI the marks link to (default: a tracking server's own, else "
        "http://127.0.0.1:5000, where make ui serves it)",
    )
    parser.add_argument(
        "--compare",
        metavar="A,B",
        help="two models side by side on the files both ran, after the matrix",
    )
    parser.add_argument(
        "--out", default="outputs/report.html", type=Path, help="(default: %(default)s)"
    )
    args = parser.parse_args(arguments)
    from tabmem.errors import TabmemError
    from tabmem.report.page import write_page

    try:
        matrix = write_page(
            _store(args.tracking_uri),
            args.out,
            args.experiments,
            args.ui_url,
            compare=_names(args.compare) or (),
        )
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{matrix.counts}: {args.out}")
    return 0


def bundle(arguments: Sequence[str], prog: str = "tabmem bundle") -> int:
    """Write a reproducibility bundle of a finished grid, for a reviewer to recheck offline.

    One folder: every finished cell run's resolved config, prompts and answers, seeds, the
    data files' sha256, package versions and the verdict table (verdicts.md).
    ``tabmem rescore BUNDLE``, in any folder, rescores the answers and says how many cells
    reproduce their recorded verdict (docs/rescoring.md).
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(bundle.__doc__ or "").split("\n\n")[0],
        epilog="then: tabmem rescore <experiment>-bundle (exit 1 if a verdict or a data file "
        "differs)",
    )
    parser.add_argument("experiment", help="the MLflow experiment of the grid (experiment=...)")
    parser.add_argument("--tracking-uri", help=STORE_HELP)
    parser.add_argument(
        "--out", type=Path, help="the bundle's folder, new or empty (default: <experiment>-bundle)"
    )
    args = parser.parse_args(arguments)
    from tabmem.errors import TabmemError
    from tabmem.report.bundle import MANIFEST, TABLE, write_bundle

    out = args.out or Path(f"{args.experiment}-bundle")
    try:
        manifest = write_bundle(_store(args.tracking_uri), args.experiment, out)
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    counts = [
        (len(manifest.cells), "cell"),
        (len(manifest.dataset_verdicts), "dataset verdict"),
        (len(manifest.data), "data file"),
    ]
    said = [f"{n} {what}{'' if n == 1 else 's'}" for n, what in counts if n]
    print(
        f"Bundle of experiment '{args.experiment}': {', '.join(said[:-1])} and {said[-1]} in "
        f"{out}/ ({MANIFEST}, {TABLE}). Check it anywhere: tabmem rescore {out}"
    )
    return 0


def tests(arguments: Sequence[str], prog: str = "tabmem tests") -> int:
    """List every test: what its evidence claims, whether it joins the dataset verdict, what it
    needs of a model and how many queries it sends (the counts of conf/test/<test>.yaml).

    Then the suites ``test=`` takes, with their members.
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(tests.__doc__ or "").split("\n\n")[0],
        epilog="then: tabmem run test=<name> (docs/tests.md says what each verdict means)",
    )
    parser.parse_args(arguments)
    import shutil

    from tabmem.report.catalog import catalog_lines

    width = shutil.get_terminal_size((100, 24)).columns
    print("\n".join(catalog_lines(width)))
    return 0


def _run(arguments: Sequence[str], prog: str = "tabmem run") -> int:
    from tabmem.main import run

    return run(arguments, prog)


def _rescore(arguments: Sequence[str], prog: str = "tabmem rescore") -> int:
    from tabmem.rescore.cli import main as rescore

    return rescore(arguments, prog)


SUBCOMMANDS: dict[str, Callable[[Sequence[str], str], int]] = {
    "run": _run,
    "rescore": _rescore,
    "tables": tables,
    "calibration": calibration,
    "lab": lab,
    "report": report,
    "bundle": bundle,
    "tests": tests,
}


def _status(call: Callable[[], int]) -> int:
    """Call a subcommand; its exit status as an int (argparse's --help and errors exit)."""
    try:
        return call()
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``tabmem COMMAND …`` to the subcommand that COMMAND names."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help", "help"):
        print(_help())
        return 0 if arguments else 2
    command, rest = arguments[0], arguments[1:]
    if command not in SUBCOMMANDS:
        print(f"tabmem: unknown command '{command}'.\n{_help()}", file=sys.stderr)
        return 2
    return _status(lambda: SUBCOMMANDS[command](rest, f"tabmem {command}"))


if __name__ == "__main__":
    sys.exit(main())
