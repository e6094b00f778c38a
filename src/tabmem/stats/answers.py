"""What in a completion counts as the model's answer: the first row it writes, or a value.

Row rule (row completion, first token): drop lines that open or close a Markdown code
fence, blank lines, a repeated header line and lead-in lines ending in a colon ("Here is
the next row:"); the answer is the first remaining line with at least half as many fields
as the header (and two at least), so other prose is passed over too. If no line has that
many fields, the first remaining line is the answer; with none, the answer is empty. Only
that one line is scored: a true row written later in a long answer does not count.

Value rule (feature completion): the first non-blank line outside a code fence, without a
leading ``Feature =`` or ``Feature:`` that repeats the question, stripped of surrounding
whitespace and quotes.
"""

from __future__ import annotations

import math
import re

from tabmem.data.csvtext import parse_fields


def _lines(completion: str) -> list[str]:
    """The completion's lines without terminators, fence lines and blank lines."""
    lines = (line.rstrip("\r") for line in completion.split("\n"))
    return [line for line in lines if line.strip() and not line.lstrip().startswith("```")]


def _fields_needed(header: str, delimiter: str) -> int:
    return max(2, math.ceil(len(parse_fields(header, delimiter)) / 2))


def _is_lead_in(line: str, header: str) -> bool:
    """A repeated header line or a lead-in ending in a colon: passed over, never the answer."""
    return line.strip() == header.strip() or line.rstrip().endswith(":")


def first_csv_row(completion: str, header: str, delimiter: str) -> str:
    """The first CSV row the completion writes (see the module docstring for the rule)."""
    needed = _fields_needed(header, delimiter)
    lines = [line for line in _lines(completion) if not _is_lead_in(line, header)]
    for line in lines:
        if len(parse_fields(line, delimiter)) >= needed:
            return line
    return lines[0] if lines else ""


def is_first_row_line(line: str, header: str, delimiter: str) -> bool:
    """Whether ``line`` is one ``first_csv_row`` takes as the answer when no such line comes
    before it (so a completion's answer is settled once such a line is complete)."""
    line = line.rstrip("\r\n")
    if not _lines(line) or _is_lead_in(line, header):
        return False
    return len(parse_fields(line, delimiter)) >= _fields_needed(header, delimiter)


def row_matches(answer: str, expected: str) -> bool:
    """Exact match of a row, ignoring trailing whitespace only."""
    return answer.rstrip() == expected.rstrip()


def feature_answer(completion: str, feature: str) -> str:
    """The value the completion gives for ``feature`` (see the module docstring)."""
    lines = _lines(completion)
    if not lines:
        return ""
    answer = re.sub(rf"^\s*{re.escape(feature)}\s*[=:]", "", lines[0]).strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "\"'":
        answer = answer[1:-1].strip()
    return answer


def values_match(answer: str, truth: str) -> bool:
    """Equal as text, or as numbers (``.28`` and ``0.28`` are one value)."""
    if answer == truth:
        return True
    try:
        return float(answer) == float(truth)
    except ValueError:
        return False
