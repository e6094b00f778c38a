"""The terminal view of one result: verdict, figures, and the best query shown in colour.

Prompt text is dim, the part of the completion that matches the truth is green,
the first wrong part is red, and the truth the model missed is shown in yellow. Without
colour (piped, ``NO_COLOR``) a labelled line separates the prompt from the answer instead.
"""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from tabmem.results import QueryRecord, TestResult, Verdict
from tabmem.stats.scoring import common_prefix_length, strip_code_fence

VERDICT_STYLE = {
    Verdict.EVIDENCE: "bold red",
    Verdict.AMBIGUOUS: "bold yellow",
    Verdict.NO_EVIDENCE: "bold green",
    Verdict.NOT_APPLICABLE: "dim",
}


CUT = "…"
"""Marks where the panel cut the start of a prompt it shows only the end of."""


def completion_text(
    record: QueryRecord, prompt_tail: int = 300, limit: int = 600, plain: bool = False
) -> Text:
    """Prompt tail (``…`` where its start was cut), then the completion split into its correct
    and incorrect parts; ``plain`` (no colour to tell them apart) puts a labelled line between
    prompt and answer."""
    whole = str(record.extra.get("prefix", ""))
    prefix = whole if len(whole) <= prompt_tail else CUT + whole[-prompt_tail:]
    completion = strip_code_fence(record.completion)
    matched = common_prefix_length(record.expected, completion)
    text = Text()
    text.append(prefix, style="dim")
    if plain:
        text.append(
            f"\n-- the model's answer ({matched} of its {len(completion)} characters "
            "match the file) --\n"
        )
    text.append(completion[:matched][:limit], style="bold green")
    text.append(completion[matched:][:limit], style="red")
    if matched < len(record.expected):
        text.append("\n-- the file goes on with --\n", style="dim italic")
        text.append(record.expected[matched:][:limit], style="yellow")
    return text


def show_brief(result: TestResult, name: str, figure: str, console: Console) -> None:
    """One line for a test of a grid's cell: its verdict, the cell and its hits (and p)."""
    style = VERDICT_STYLE[result.verdict]
    line = Text(f"{result.verdict.value:<14}", style=style)
    line.append(f" {name}  {figure}")
    console.print(line, no_wrap=True, overflow="ellipsis")


def show_result(result: TestResult, console: Console, verbose: bool = True) -> None:
    """Print the verdict line and, if ``verbose``, the best-scoring query."""
    style = VERDICT_STYLE[result.verdict]
    console.print(
        f"[{style}]{result.verdict.value}[/] {result.test}: {result.reason} "
        f"[dim]({result.n_hits}/{result.n_queries} queries)[/]"
    )
    if verbose and result.records:
        best = max(result.records, key=lambda r: (r.score, r.extra.get("verbatim_chars", 0)))
        title = (
            f"best query (score {best.score:g}): prompt dim, correct green, wrong red, truth yellow"
        )
        plain = console.color_system is None
        console.print(Panel(completion_text(best, plain=plain), title=title, expand=False))
