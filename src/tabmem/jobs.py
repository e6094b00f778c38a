"""A grid cell's job: its test plan, the skip rules of grids, the outputs folder, and the
per-test files the end-of-run summary reads (``cell-*.json``, and ``plan-*.json`` in a dry
run). The runner, the dry run and the summary share these. (Not ``grid``: ``tabmem.grid`` is
the Python API's function.)"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CELL_GLOB = "cell-*.json"
PLAN_GLOB = "plan-*.json"
SPEND_LEDGER = "spend.json"


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
    p_value: float | None = None
    seed: int = 0
    group: str = ""  # the cell's model, dataset, transform and seed: what a dataset verdict joins
    model_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    evaluated_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_answers: int = 0
    uncounted_answers: int = 0

    def add_calls(self, calls: dict[str, float]) -> None:
        """Take the calls, tokens and dollars of the cell's queries."""
        for name in SPEND:
            kind = type(getattr(self, name))
            setattr(self, name, kind(calls.get(name, 0)))

    def write(self, folder: Path) -> None:
        """One file per test of the cell, read back by the end-of-run summary."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"cell-{self.test}.json").write_text(json.dumps(asdict(self), indent=2))


SPEND = (
    "model_calls",
    "cache_hits",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "evaluated_tokens",
    "cost_usd",
    "unpriced_answers",
    "uncounted_answers",
)
"""What a cell's queries spent (``CallStats``' counters the summary shows and sums)."""


def outputs_dir(cfg: Any) -> Path:
    """The resolved ``outputs_dir``: runs, MLflow store, cache and weights live there."""
    return Path(str(cfg.outputs_dir)).expanduser().resolve()


def batch_dir(cfg: Any) -> Path | None:
    """Where a grid with ``batch=true`` keeps its pending batches' ids; None without it."""
    return outputs_dir(cfg) / "batches" if cfg.get("batch") else None


def test_plan(test_cfg: Any) -> list[tuple[str, Any]]:
    """The tests a cell runs: one, or each member of a suite such as ``test=memorization``."""
    from tabmem.suites import suite_plan

    return suite_plan(test_cfg)


def skip_reason(cfg: Any, test: str) -> str:
    """Why a grid that sets ``skip_unrunnable: true`` skips a test of this cell ('' to run it).

    Only grids skip (``conf/grid/paper.yaml``): a single run or a plain sweep still fails with
    the error, so a missing file someone asked for by name is never passed over in silence.
    """
    if not cfg.get("skip_unrunnable"):
        return ""
    from tabmem.battery.base import needs_of
    from tabmem.data.registry import resolve_path, spec_from_config
    from tabmem.errors import DatasetError
    from tabmem.llm.base import FIT

    only = cfg.get("only_datasets")
    if only and str(cfg.dataset.name) not in only:
        return f"this part of the grid runs on {', '.join(map(str, only))} only"
    models = cfg.get("only_models")
    if models and str(cfg.model.name) not in models:
        return f"this part of the grid runs the models {', '.join(map(str, models))} only"
    if cfg.model.get("backend") == "baseline" and FIT not in needs_of(test):
        return f"model '{cfg.model.name}' is a statistical baseline: it runs learning tests only"
    try:
        resolve_path(spec_from_config(cfg.dataset))
    except DatasetError as exc:
        return f"dataset file not present: {exc}"
    return ""
