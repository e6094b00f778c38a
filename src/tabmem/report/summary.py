"""The table printed at the end of a run or sweep, from the cells' outcome files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from rich.console import Console
from rich.table import Table

from tabmem.runner import CELL_GLOB

STATUS_STYLE = {"finished": "green", "skipped": "dim", "failed": "bold red"}


def read_outcomes(folder: Path) -> list[dict[str, Any]]:
    """Every cell outcome written under ``folder`` (one per job directory)."""
    files = sorted(folder.glob(CELL_GLOB))
    files += sorted(folder.glob(f"*/{CELL_GLOB}"), key=lambda p: _job_number(p.parent.name))
    return [json.loads(f.read_text()) for f in files]


def _job_number(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)


def summary_table(outcomes: list[dict[str, Any]]) -> Table:
    table = Table(title="tabmem summary", show_lines=False)
    for column in (
        "model",
        "dataset",
        "test",
        "transform",
        "status",
        "verdict",
        "hits",
        "calls",
        "cached",
        "run id",
    ):
        table.add_column(column, overflow="fold")
    for o in outcomes:
        style = STATUS_STYLE.get(o["status"], "")
        table.add_row(
            o["model"],
            o["dataset"],
            o["test"],
            o["transform"],
            f"[{style}]{o['status']}[/]",
            o["verdict"] or "-",
            o["figure"] or "-",
            str(o["model_calls"]),
            str(o["cache_hits"]),
            o["run_id"][:12],
        )
    return table


def print_summary(
    folder: Path, tracking_uri: str, experiment: str, console: Console | None = None
) -> None:
    """The summary table, the failures spelled out, and where MLflow keeps the runs."""
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    outcomes = read_outcomes(folder)
    if not outcomes:
        console.print(f"No cell outcomes under {folder}.")
        return
    console.print(summary_table(outcomes))
    for o in outcomes:
        if o["status"] == "failed":
            console.print(
                f"[bold red]failed[/] {o['model']} | {o['dataset']} | {o['test']}: {o['message']}"
            )
    counts = {s: sum(o["status"] == s for o in outcomes) for s in STATUS_STYLE}
    console.print(
        f"{counts['finished']} finished, {counts['skipped']} skipped, {counts['failed']} failed. "
        f"MLflow runs: experiment '{experiment}' in {tracking_uri} (browse them with: make ui)."
    )


class SummaryCallback(Callback):
    """Hydra callback: print the summary after a single run or after a whole sweep."""

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        self._print(Path(config.hydra.run.dir), config)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        self._print(Path(config.hydra.sweep.dir), config)

    @staticmethod
    def _print(folder: Path, config: Any) -> None:
        from tabmem.tracking.store import default_tracking_uri

        outputs = Path(str(config.outputs_dir)).expanduser().resolve()
        uri = config.tracking.uri or default_tracking_uri(outputs)
        print_summary(folder, uri, str(config.experiment))
