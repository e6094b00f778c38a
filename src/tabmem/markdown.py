"""A Markdown table: the one writer the lab, the calibration and the reports share."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def markdown_table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table: the header, its rule, one line a row (cells as
    ``str`` gives them; a caller escapes a ``|`` it may hold), without a final newline."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)
