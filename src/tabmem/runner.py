"""Run one grid cell: load the dataset, build the model, run the test, track the result."""

from __future__ import annotations

import json
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from rich.console import Console

from tabmem.cell import Cell, cell_params, config_hash
from tabmem.data import load_dataset
from tabmem.errors import TabmemError
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.registry import build_model
from tabmem.report.terminal import show_result
from tabmem.results import TestResult
from tabmem.tests.base import TestContext, get_test
from tabmem.tracking.store import TrackingStore, default_tracking_uri

CELL_FILE = "cell.json"


@dataclass
class CellOutcome:
    """What happened to a cell, as the end-of-run summary shows it."""

    model: str
    dataset: str
    test: str
    transform: str
    status: str
    verdict: str = ""
    figure: str = ""
    run_id: str = ""
    message: str = ""
    model_calls: int = 0
    cache_hits: int = 0

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CELL_FILE).write_text(json.dumps(asdict(self), indent=2))


def _outputs(cfg: Any) -> Path:
    return Path(str(cfg.outputs_dir)).expanduser().resolve()


def open_store(cfg: Any) -> TrackingStore:
    outputs = _outputs(cfg)
    uri = cfg.tracking.uri or default_tracking_uri(outputs)
    artifact_root = Path(str(cfg.tracking.artifact_root or outputs / "mlartifacts"))
    return TrackingStore(
        uri=uri,
        artifact_root=artifact_root,
        experiment=str(cfg.experiment),
        lock_path=outputs / "mlflow.lock",
    )


def queries_table(result: TestResult) -> pd.DataFrame:
    """Every query of a result as rows: prompt, expected, completion, score, error."""
    return pd.DataFrame(
        [
            {
                "prompt": r.prompt,
                "expected": r.expected,
                "completion": r.completion,
                "score": r.score,
                "error": r.error or "",
                **{
                    k: json.dumps(v) if isinstance(v, list | dict) else v
                    for k, v in r.extra.items()
                },
            }
            for r in result.records
        ]
    )


def headline(result: TestResult) -> str:
    """The figure a summary row shows: hits of queries and, if any, the p-value."""
    text = f"{result.n_hits}/{result.n_queries}"
    if result.p_value is not None:
        text += f" (p={result.p_value:.2g})"
    return text


def run_cell(
    cfg: Any, resolved_yaml: str, job_dir: Path, console: Console | None = None
) -> CellOutcome:
    """Run one cell end to end; never raises for a cell's own failure."""
    console = console or Console()
    cell = Cell.from_config(cfg)
    params = cell_params(cfg)
    digest = config_hash(params)
    outcome = CellOutcome(**cell.tags(), status="failed")
    store = open_store(cfg)
    tags = {**cell.tags(), "config_hash": digest, "sweep_dir": str(job_dir.parent)}

    existing = None if cfg.force else store.finished_run(digest)
    if existing:
        outcome.status, outcome.run_id = "skipped", existing
        outcome.message = "already finished (force=true runs it again)"
        console.print(f"[dim]skip[/] {cell.run_name}: already finished as run {existing}")
        outcome.write(job_dir)
        return outcome

    model: LanguageModel | None = None
    cache = ResponseCache(_outputs(cfg) / "cache" / "responses.sqlite")
    try:
        dataset = load_dataset(cfg.dataset)
        model = build_model(
            cfg.model, cache, _outputs(cfg) / "weights", show_progress=bool(cfg.progress)
        )
        result = get_test(str(cfg.test.name))(
            TestContext(dataset=dataset, model=model, params=cfg.test, seed=int(cfg.seed))
        )
    except Exception as exc:
        message = str(exc) if isinstance(exc, TabmemError) else f"{type(exc).__name__}: {exc}"
        texts = {"config.yaml": resolved_yaml}
        if not isinstance(exc, TabmemError):
            texts["traceback.txt"] = traceback.format_exc()
        outcome.run_id = store.log_cell(
            cell.run_name,
            {**tags, "verdict": "failed", "error": message[:5000]},
            params,
            {},
            {},
            texts,
            failed=True,
        )
        outcome.message = message
        console.print(f"[bold red]failed[/] {cell.run_name}: {message}")
        outcome.write(job_dir)
        return outcome
    finally:
        if model is not None:
            model.close()
        cache.close()

    show_result(result, console, verbose=bool(cfg.show_queries))
    metrics = {**result.all_metrics(), **model.stats.as_dict()}
    outcome.run_id = store.log_cell(
        cell.run_name,
        {**tags, "verdict": result.verdict.value, "reason": result.reason[:5000]},
        params,
        metrics,
        {"queries.json": queries_table(result)} if result.records else {},
        {
            "config.yaml": resolved_yaml,
            "result.yaml": yaml.safe_dump(
                {
                    "verdict": result.verdict.value,
                    "reason": result.reason,
                    "metrics": metrics,
                    "info": result.info,
                },
                sort_keys=False,
                allow_unicode=True,
            ),
        },
        failed=False,
    )
    outcome.status = "finished"
    outcome.verdict = result.verdict.value
    outcome.figure = headline(result)
    outcome.model_calls = model.stats.model_calls
    outcome.cache_hits = model.stats.cache_hits
    outcome.write(job_dir)
    return outcome
