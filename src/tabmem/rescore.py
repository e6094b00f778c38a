"""Score answers recorded elsewhere with a test's own scoring and verdict, logged as a run.

    python -m tabmem.rescore FILE --dataset NAME --test TEST --model-name NAME
        [--format queries|published] [--transform NAME] [--seed N] [--experiment NAME]
        [--outputs-dir DIR] [--set KEY=VALUE ...] [--force]

Two layouts are read. ``queries``: a run's query table as this harness logs it
(``queries.json``, MLflow's table layout). ``published``: the CSV layout in which transcripts
of the papers' models were published, one file per model, test and dataset, with columns
``prefix,suffix,response`` (header: the file's beginning cut inside a row; row completion
and first token: a window of rows and the row after it; feature completion: ``Feature =
Value`` lines ending in the asked ``Feature =``).
Each line is located in the dataset; lines that cannot be located are counted and reported,
never scored. The run is logged like a live cell, tagged ``source=transcript`` with the
file's sha256, so reports show it beside live runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, Recorded, Rescorable, rescorable_test
from tabmem.errors import ConfigError, DatasetError, TabmemError
from tabmem.llm.base import Response
from tabmem.results import TestResult

FORMATS = ("queries", "published")
PUBLISHED_COLUMNS = ("prefix", "suffix", "response")
REASONS_SHOWN = 5


@dataclass
class Located:
    """A transcript's lines split into the queries found in the dataset and those not found."""

    lines: int
    queries: list[tuple[Any, Recorded]]
    missing: Counter[str]


@dataclass
class Rescored:
    """What a rescoring produced: the result, how many lines were located, and its run."""

    result: TestResult
    located: Located
    run_id: str | None


def read_transcript(path: Path, layout: str) -> list[Recorded]:
    """The lines of a transcript file in ``layout`` ("queries" or "published")."""
    if not path.is_file():
        raise DatasetError(f"Transcript file {path} does not exist.")
    if layout == "queries":
        return _read_queries(path)
    if layout == "published":
        return _read_published(path)
    raise ConfigError(f"Unknown transcript format '{layout}'; choose one of: {', '.join(FORMATS)}.")


def guess_format(path: Path) -> str:
    """``queries`` for a .json file, ``published`` for anything else (CSV)."""
    return "queries" if path.suffix.lower() == ".json" else "published"


def _read_queries(path: Path) -> list[Recorded]:
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
        rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise DatasetError(
            f"{path} is not a query table as tabmem logs it (JSON with 'columns' and 'data'): {exc}"
        ) from exc
    return [
        Recorded(
            prompt=str(row.get("prompt", "")),
            prefix=str(row.get("prefix") or row.get("prompt", "")),
            suffix=str(row.get("expected", "")),
            response=str(row.get("completion", "")),
            error=str(row["error"]) if row.get("error") else None,
        )
        for row in rows
    ]


def _read_published(path: Path) -> list[Recorded]:
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise DatasetError(f"{path} is not a readable CSV file: {exc}") from exc
    missing = [c for c in PUBLISHED_COLUMNS if c not in frame.columns]
    if missing:
        raise DatasetError(
            f"{path} lacks the column(s) {', '.join(missing)} of the published layout "
            f"({','.join(PUBLISHED_COLUMNS)})."
        )
    return [
        Recorded(prompt=row.prefix, prefix=row.prefix, suffix=row.suffix, response=row.response)
        for row in frame.itertuples(index=False)
    ]


def locate_all(test: Rescorable[Any, Any], ctx: TestContext, lines: Sequence[Recorded]) -> Located:
    """Find every line's query in the dataset; count why the others were not found."""
    located = Located(len(lines), [], Counter())
    for line in lines:
        query = test.locate(ctx, line)
        if isinstance(query, str):
            located.missing[query] += 1
        else:
            located.queries.append((query, line))
    return located


def rescore(
    test: Rescorable[Any, Any], ctx: TestContext, lines: Sequence[Recorded]
) -> tuple[TestResult, Located]:
    """Locate the lines, fit the test's data-only facts for the located queries, score each
    recorded answer and decide, exactly as a live run scores and decides its own answers."""
    ctx = test.bind(ctx)
    located = locate_all(test, ctx, lines)
    if not located.queries:
        reasons = "; ".join(located.missing)
        raise DatasetError(
            f"None of the {len(lines)} lines of the transcript was found in {ctx.dataset.name} "
            f"({reasons or 'the file is empty'})."
        )
    facts = test.prepare(ctx, [q for q, _ in located.queries])
    if isinstance(facts, TestResult):
        result = facts
    else:
        answers = [
            Answer(i, query, line.prompt, Response(text=line.response, error=line.error))
            for i, (query, line) in enumerate(located.queries)
        ]
        result = test.judge(ctx, facts, answers, {})
    result.metrics.update(
        {"transcript_lines": len(lines), "queries_not_located": sum(located.missing.values())}
    )
    if located.missing:
        shown = located.missing.most_common(REASONS_SHOWN)
        result.info["not_located"] = "; ".join(f"{n} × {reason}" for reason, n in shown)
    return result, located


def run_rescore(
    path: Path,
    dataset: str,
    test_name: str,
    model_name: str,
    *,
    layout: str | None = None,
    transform: str = "original",
    seed: int = 0,
    experiment: str = "rescore",
    outputs_dir: Path = Path("outputs"),
    settings: Sequence[str] = (),
    force: bool = False,
    quiet: bool = False,
) -> Rescored:
    """Rescore a transcript file and log it as an MLflow run of ``experiment`` (a file already
    rescored with the same settings is read back unless ``force``)."""
    from omegaconf import OmegaConf
    from rich.console import Console

    from tabmem.api import compose_config, dataset_overrides, outputs_path
    from tabmem.cell import Cell, config_hash, flatten
    from tabmem.data import load_dataset
    from tabmem.data.transforms import apply_transform
    from tabmem.data.twin import twin_info
    from tabmem.runner import log_result, open_store
    from tabmem.tracking.traces import QueryLog

    test = rescorable_test(test_name)
    lines = read_transcript(path, layout or guess_format(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    overrides = [f"outputs_dir={outputs_dir}", f"experiment={experiment}", f"seed={seed}"]
    outputs = outputs_path(compose_config(overrides))
    overrides += [
        *dataset_overrides(dataset, None, outputs),
        f"test={test_name}",
        f"transform={transform}",
        "progress=false",
        f"force={'true' if force else 'false'}",
    ]
    cfg = compose_config(overrides)
    if cfg.test.get("suite"):
        raise ConfigError(f"Rescoring takes one test; '{test_name}' is a suite.")
    implied = test.settings_for(lines)
    given = dict(_setting(s) for s in settings)
    params = {**OmegaConf.to_container(cfg.test, resolve=True), **implied, **given}
    data = apply_transform(load_dataset(cfg.dataset), cfg.transform, seed)
    ctx = TestContext(dataset=data, model=None, params=params, seed=seed)
    started = datetime.now()
    result, located = rescore(test, ctx, lines)
    result.info.update(twin_info(data))
    cell = Cell(model_name, data.name, test_name, str(cfg.transform.name))
    tree = {
        "model": {"name": model_name, "source": "transcript"},
        "dataset": OmegaConf.to_container(cfg.dataset, resolve=True),
        "test": params,
        "transform": OmegaConf.to_container(cfg.transform, resolve=True),
        "seed": seed,
        "transcript_sha256": digest,
    }
    cell_params = flatten(tree)
    store = open_store(cfg)
    console = Console(quiet=quiet)
    run_id = None
    if not cfg.force:
        run_id = store.finished_run(config_hash(cell_params))
    if run_id is None:
        window = (int(started.timestamp() * 1e9), int(datetime.now().timestamp() * 1e9))
        outcome = log_result(
            store,
            cell,
            cell_params,
            "",
            outputs / "rescore" / started.strftime("%Y-%m-%d/%H-%M-%S-%f"),
            OmegaConf.to_yaml(OmegaConf.create({**tree, "transcript": str(path)})),
            result,
            {},
            cfg,
            console,
            QueryLog(result.records, cell.tags(), window),
            extra_tags={"source": "transcript", "transcript_sha256": digest},
        )
        run_id = outcome.run_id
    else:
        console.print(f"[dim]skip[/] {cell.run_name}: already rescored as run {run_id}")
    return Rescored(result, located, run_id)


def _setting(text: str) -> tuple[str, Any]:
    """``key=value`` with the value read as YAML (numbers, lists, null)."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set takes KEY=VALUE, not '{text}'.")
    return key.removeprefix("test."), yaml.safe_load(value)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = argparse.ArgumentParser(
        prog="python -m tabmem.rescore",
        description="Score recorded answers with a test's scoring and verdict; log an MLflow run.",
    )
    parser.add_argument("file", type=Path, help="queries.json of a run, or a published CSV")
    parser.add_argument("--dataset", required=True, help="a dataset config name or a CSV path")
    parser.add_argument(
        "--test", required=True, help="header, row_completion, first_token or feature_completion"
    )
    parser.add_argument("--model-name", required=True, help="the model that gave the answers")
    parser.add_argument("--format", choices=FORMATS, help="default: queries for .json, else CSV")
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
    args = parser.parse_args(argv)
    try:
        done = run_rescore(
            args.file,
            args.dataset,
            args.test,
            args.model_name,
            layout=args.format,
            transform=args.transform,
            seed=args.seed,
            experiment=args.experiment,
            outputs_dir=args.outputs_dir,
            settings=args.set,
            force=args.force,
        )
    except TabmemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    located = done.located
    print(
        f"Located {len(located.queries)} of {located.lines} lines"
        + (f" ({done.result.info['not_located']})" if located.missing else "")
        + f"; verdict {done.result.verdict.value}; run {done.run_id}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
