"""``python -m tabmem.rescore``: one transcript file, a whole folder of published answers, or a
grid's bundle (``tabmem bundle``)."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tabmem.errors import ConfigError, TabmemError
from tabmem.rescore.folder import (
    RESCORED,
    folder_dataset_verdicts,
    located_text,
    rescore_folder,
    rescoring_status,
)
from tabmem.rescore.layouts import FORMATS

if TYPE_CHECKING:
    from tabmem.report.dataset_verdicts import DatasetOutcome
    from tabmem.results import CellResult
from tabmem.rescore.run import recorded_config, recorded_settings, run_rescore


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Score recorded answers with a test's scoring and verdict; log MLflow runs.",
    )
    parser.add_argument(
        "file",
        type=Path,
        nargs="?",
        help="queries.json of a run, a CSV, or a bundle folder (tabmem bundle): every cell "
        "rescored, and how many reproduce their recorded verdict",
    )
    parser.add_argument(
        "--folder", type=Path, help="a folder of published answers, <model>/<kind>/<file>.csv"
    )
    parser.add_argument("--mapping", type=Path, help="folder mapping (conf/rescore/published.yaml)")
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="the file of a dataset users provide, e.g. --data spaceship-titanic=train.csv",
    )
    parser.add_argument("--dataset", help="a dataset config name or a CSV path")
    parser.add_argument("--test", help="header, row_completion, first_token, feature_completion, …")
    parser.add_argument("--model-name", help="the model that gave the answers")
    parser.add_argument("--format", choices=FORMATS, help="default: guessed from the file")
    parser.add_argument(
        "--ignore-column",
        action="append",
        default=[],
        metavar="NAME",
        help="a feature-table column that holds parsing artefacts",
    )
    parser.add_argument("--transform", default="original")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--experiment", default="rescore", help="MLflow experiment")
    parser.add_argument("--outputs-dir", type=Path, default=Path("outputs"))
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a test setting, e.g. --set alpha=0.05",
    )
    parser.add_argument("--force", action="store_true", help="log again a file rescored before")
    return parser


def data_paths(items: Sequence[str]) -> dict[str, Path]:
    """``NAME=PATH`` items as a mapping."""
    paths = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"--data takes NAME=PATH, not '{item}'.")
        paths[name] = Path(path).expanduser()
    return paths


def _figure(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def summary(outcomes: Sequence[CellResult]) -> str:
    """The outcomes as a plain-text table, then the counts by status."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Rescored files", show_lines=False)
    for column in ("file", "test", "located", "hits", "baseline", "p", "verdict", "note"):
        table.add_column(column, overflow="fold")
    for o in outcomes:
        status = rescoring_status(o)
        done = status == RESCORED
        table.add_row(
            o.source,
            o.test,
            located_text(o) if done else "",
            f"{o.n_hits}/{o.n_queries}" if done else "",
            _figure(o.baseline) if done else "",
            _figure(o.p_value) if done else "",
            o.verdict if done else status,
            o.message,
        )
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(table)
    counts = Counter(rescoring_status(o) for o in outcomes)
    tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return console.export_text() + f"{len(outcomes)} file × test pairs: {tally}.\n"


def dataset_summary(verdicts: Sequence[DatasetOutcome]) -> str:
    """The dataset verdicts of the folder as plain text, after the files' table."""
    from rich.console import Console

    from tabmem.report.dataset_verdicts import dataset_table

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(dataset_table(verdicts))
    return console.export_text()


def _one_file(args: argparse.Namespace) -> str:
    """Rescore one file; what the flags leave out is read from a run's ``config.yaml`` beside
    it (flags at their defaults, ``--transform=original`` and ``--seed=0``, give way to it), the
    test's recorded settings among it (``--set`` overrides them)."""
    beside = recorded_config(args.file) if args.file.suffix == ".json" else {}
    given = {"--dataset": args.dataset, "--test": args.test, "--model-name": args.model_name}
    needed = {flag: value or beside.get(flag) for flag, value in given.items()}
    missing = [flag for flag, value in needed.items() if not value]
    if missing:
        raise ConfigError(
            f"Rescoring one file needs {', '.join(missing)} (or a run's config.yaml beside it)."
        )
    paths = data_paths(args.data)
    if not args.dataset and beside.get("data_path") not in (None, needed["--dataset"]):
        paths.setdefault(str(needed["--dataset"]), Path(beside["data_path"]))
    transform = beside.get("transform") if args.transform == "original" else args.transform
    seed = beside.get("seed") if args.seed == 0 else args.seed
    done = run_rescore(
        args.file,
        str(needed["--dataset"]),
        str(needed["--test"]),
        str(needed["--model-name"]),
        layout=args.format,
        transform=str(transform or "original"),
        seed=int(seed or 0),
        experiment=args.experiment,
        outputs_dir=args.outputs_dir,
        settings=[*recorded_settings(beside, str(needed["--test"])), *args.set],
        ignore=args.ignore_column,
        data_path=paths.get(str(needed["--dataset"])),
        dataset_name=None if args.dataset else beside.get("dataset_name"),
        force=args.force,
    )
    located = done.located
    return (
        f"Located {len(located.queries)} of {located.lines} lines"
        + (f" ({done.result.info['not_located']})" if located.missing else "")
        + f"; verdict {done.result.verdict.value}; run {done.run_id}."
    )


def main(argv: Sequence[str] | None = None, prog: str = "python -m tabmem.rescore") -> int:
    """Rescore one transcript file, a folder of them or a bundle; the exit status (a bundle:
    1 where a verdict or a data file differs from the bundle's)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = _parser(prog).parse_args(argv)
    try:
        if (args.file is None) == (args.folder is None):
            raise ConfigError("Give one transcript FILE or one --folder DIR.")
        if args.file is not None and args.file.is_dir():
            from tabmem.rescore.bundle import check_bundle

            check = check_bundle(
                args.file,
                experiment=args.experiment,
                outputs_dir=args.outputs_dir,
                data_paths=data_paths(args.data),
            )
            print(check.said())
            return 0 if check.reproduces else 1
        if args.folder is not None:
            outcomes = rescore_folder(
                args.folder,
                mapping_path=args.mapping,
                data_paths=data_paths(args.data),
                experiment=args.experiment,
                outputs_dir=args.outputs_dir,
                seed=args.seed,
                force=args.force,
            )
            print(summary(outcomes), end="")
            verdicts = folder_dataset_verdicts(outcomes, args.experiment, args.outputs_dir)
            if verdicts:
                print(dataset_summary(verdicts), end="")
        else:
            print(_one_file(args))
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
