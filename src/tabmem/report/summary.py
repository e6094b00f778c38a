"""What is printed at the end of a run or sweep, from the cells' outcome files.

One line per model × dataset (``tabmem.report.answer``), every test of each with ``detail=true``,
each failure and skip reason once, the grid's spend (tokens and USD the providers reported) and
where MLflow keeps the runs, with the address of their list in the UI; a dry run prints instead
the bill it would run up (``plan_table``), one combined table for a whole sweep.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tabmem.jobs import CELL_GLOB, PLAN_GLOB
from tabmem.report.answer import (
    answer_notes,
    answer_table,
    answers,
    detail_table,
    problems,
    summary_console,
    usd,
)
from tabmem.results import SPEND, CellResult
from tabmem.tracking.ui_links import browse_hint

if TYPE_CHECKING:
    from tabmem.report.dataset_verdicts import DatasetOutcome

STATUS_STYLE = {"finished": "green", "skipped": "dim", "failed": "bold red"}


def read_outcomes(folder: Path, glob: str = CELL_GLOB) -> list[dict[str, Any]]:
    """Every cell outcome (or dry-run plan) written under ``folder`` (one per job directory)."""
    files = sorted(folder.glob(glob))
    files += sorted(folder.glob(f"*/{glob}"), key=lambda p: _job_number(p.parent.name))
    return [json.loads(f.read_text()) for f in files]


def _job_number(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)


def summary_table(outcomes: list[dict[str, Any]]) -> Table:
    """Every test as one row of a table (for scripts that want rich's table; the terminal
    prints ``answer.detail_table``)."""
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
        "cost $",
        "run id",
    ):
        table.add_column(column)
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
            usd(o),
            o["run_id"][:12],
        )
    return table


def spend_line(outcomes: list[dict[str, Any]]) -> str:
    """The grid's total spend, counted as the summary's ``calls`` and ``cached`` columns count:
    the requests sent and what their answers' servers reported in tokens and USD (and how many
    answers came without a token count), then the answers served from the cache."""
    total = {key: sum(o.get(key, 0) for o in outcomes) for key in SPEND}
    text = (
        f"Spend: ${total['cost_usd']:.4f} for {_calls(total['model_calls'])} "
        f"({total['prompt_tokens']:,} prompt and {total['completion_tokens']:,} completion "
        "tokens reported"
    )
    if total["uncounted_answers"]:
        text += (
            f"; {total['uncounted_answers']:,} answers came without a token count: a stream "
            "stopped once its score was settled, or a server that reports none"
        )
    text += (
        f") and {total['cache_hits']:,} cached answers at no cost "
        f"({total['cached_prompt_tokens']:,} prompt tokens)"
    )
    if total["unpriced_answers"]:
        text += f"; {total['unpriced_answers']} answers from models with unknown price"
    if total["evaluated_tokens"]:
        text += f"; {total['evaluated_tokens']:,} tokens evaluated by local models"
    return text + "."


def _calls(n: int) -> str:
    return "1 call" if n == 1 else f"{n:,} calls"


def plan_table(plans: list[dict[str, Any]]) -> Table:
    """A dry run's bill, per cell and in total."""
    table = Table(title="tabmem dry run: nothing was sent", show_lines=False)
    columns = ("model", "dataset", "test", "transform", "requests", "cached")
    for column in (*columns, "prompt tokens", "max completion tokens", "estimated $", "note"):
        # a figure or a price is never wrapped (no "unknown" on one line, "price" on the next)
        table.add_column(column, overflow="fold", no_wrap=column == "estimated $")
    for p in plans:
        table.add_row(
            *(str(p.get(c, "")) for c in columns[:4]),
            *(_count(p.get(c)) for c in ("requests", "cached", "prompt_tokens")),
            _count(p.get("max_completion_tokens")) + _thinking(p.get("reasoning_tokens")),
            _estimate(p),
            str(p.get("note", "")),
        )
    sums = {
        key: sum(p.get(key) or 0 for p in plans)
        for key in ("requests", "cached", "prompt_tokens", "max_completion_tokens")
    }
    priced = [p["estimated_usd"] for p in plans if p.get("estimated_usd") is not None]
    unknown = any(p.get("estimated_usd") is None and p.get("requests") for p in plans)
    total = f"{sum(priced):.4f}" + (" + unknown price" if unknown else "")
    table.add_section()
    table.add_row(
        "total",
        "",
        "",
        "",
        *(f"{sums[key]:,}" for key in sums),
        f"[bold]{total}[/]",
        "",
    )
    return table


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def _thinking(value: Any) -> str:
    """The reasoning allowance within a bound, where the model reasons."""
    return f" (thinking {value:,})" if value else ""


def _estimate(plan: dict[str, Any]) -> str:
    if plan.get("requests") is None:
        return "-"
    if plan.get("estimated_usd") is None:
        return "unknown price" if plan["requests"] else "0"
    return f"{plan['estimated_usd']:.4f}"


def print_plan(folder: Path, console: Console | None = None) -> None:
    """The dry run's combined table, for one run or a whole sweep."""
    console = console or summary_console()
    plans = read_outcomes(folder, PLAN_GLOB)
    if not plans:
        console.print(f"No dry-run plans under {folder}.")
        return
    console.print(plan_table(plans))
    console.print(
        "Estimates: prompt tokens as the model's tokenizer or litellm's counter counts them; "
        "completions at their max_tokens (an upper bound); prices from the model config or "
        "litellm's offline cost map. Nothing was sent, cached or logged."
    )


def ceiling_note(verdicts: Sequence[DatasetOutcome]) -> str:
    """Why a combined p-value is exactly 0.5, where one is: no test found anything, and each
    p-value above 0.5 counts as 0.5 in the combination (``stats.combine.P_CEILING``)."""
    from tabmem.stats.combine import P_CEILING

    if not any(v.verdict.p_value == P_CEILING for v in verdicts):
        return ""
    return (
        f"p {P_CEILING:g}: no combined test found anything (p-values above {P_CEILING:g} count as "
        f"{P_CEILING:g} when combined)."
    )


def print_summary(
    folder: Path,
    tracking_uri: str,
    experiment: str,
    console: Console | None = None,
    verdicts: Sequence[DatasetOutcome] = (),
    detail: bool = False,
) -> int:
    """One line per model × dataset (with ``detail``, every test of each after it), each
    failure and skip reason once, the spend, and where MLflow keeps the runs; the number of
    failed tests."""
    console = console or summary_console()
    outcomes = read_outcomes(folder)
    if not outcomes:
        console.print(f"No cell outcomes under {folder}.")
        return 0
    found = answers(outcomes, verdicts)
    width = console.width
    if found:
        console.print(Text("tabmem summary: one answer per model × dataset", style="bold"))
        for line in answer_table(found, width):
            console.print(line, no_wrap=True, overflow="ignore", crop=False)
        for note in answer_notes(found, verdicts):
            console.print(note, style="dim")
        ceiling = ceiling_note(verdicts)
        if ceiling:
            console.print(ceiling, style="dim")
    if detail:
        console.print(Text("tabmem summary: every test", style="bold"))
        for line in detail_table(outcomes, width):
            console.print(line, no_wrap=True, overflow="ignore", crop=False)
    elif len(found) < len(outcomes):
        console.print("detail=true lists every test with its hits, calls and run.", style="dim")
    for line in problems(outcomes):
        console.print(line)
    counts = {s: sum(o["status"] == s for o in outcomes) for s in STATUS_STYLE}
    console.print(spend_line(outcomes))
    console.print(
        f"{counts['finished']} finished, {counts['skipped']} skipped, {counts['failed']} failed. "
        f"MLflow runs: experiment '{experiment}' in {tracking_uri}."
    )
    console.print(f"Its runs: {browse_hint(tracking_uri, experiment)}")
    return counts["failed"]


class SummaryCallback(Callback):
    """Hydra callback: after a single run or a whole sweep, log the dataset verdicts, print
    the summary and write the experiment's page of who memorized what (``report.html``) into
    the run's or sweep's folder (a sweep also logs it to MLflow: ``page.log_page``); a sweep
    with a failed cell then exits with status 1, as a single run does (``run.py``), so a
    script or scheduler sees the failure."""

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        self._print(Path(config.hydra.run.dir), config, grid=False)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        if self._print(Path(config.hydra.sweep.dir), config, grid=True):
            sys.exit(1)

    @staticmethod
    def _print(folder: Path, config: Any, grid: bool) -> int:
        from tabmem.report.dataset_verdicts import combine_outcomes, logged, rule_of
        from tabmem.tracking.store import TrackingStore, tracking_uri

        if config.get("dry_run"):
            print_plan(folder)
            return 0
        outputs = Path(str(config.outputs_dir)).expanduser().resolve()
        outcomes = [CellResult(**o) for o in read_outcomes(folder)]
        rule = rule_of(config)
        combined = combine_outcomes(outcomes, rule)
        verdicts: list[DatasetOutcome] = []
        store = None
        if combined:  # the store is opened only to log dataset verdicts
            store = TrackingStore.at(
                outputs, str(config.experiment), config.tracking.uri, config.tracking.artifact_root
            )
            verdicts = logged(combined, rule, store)
        uri = store.uri if store else tracking_uri(config.tracking.uri, outputs)
        failed = print_summary(
            folder,
            uri,
            str(config.experiment),
            verdicts=verdicts,
            detail=bool(config.get("detail", False)),
        )
        # the experiment's page of who memorized what, where this run added a run to it (a
        # run of finished cells only leaves the page as it was)
        if any(o.run_id and o.status != "skipped" for o in outcomes):
            from tabmem.report.page import PAGE_NAME, log_page, pages_experiment, write_page

            experiment = str(config.experiment)
            write_page(uri, folder / PAGE_NAME, [experiment], skipped=outcomes)
            print(f"Who memorized what (experiment '{experiment}'): {folder / PAGE_NAME}")
            if grid:
                pages = TrackingStore.at(
                    outputs,
                    pages_experiment(experiment),
                    config.tracking.uri,
                    config.tracking.artifact_root,
                )
                log_page(pages, folder / PAGE_NAME, experiment, folder)
                print(f"  also in MLflow: experiment '{pages.experiment}', artifact {PAGE_NAME}")
        return failed
