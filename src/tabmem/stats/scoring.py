"""How completions are compared with the true text."""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz.distance import Levenshtein


def common_prefix_length(a: str, b: str) -> int:
    """Number of leading characters ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def strip_code_fence(completion: str) -> str:
    """Drop a leading Markdown code fence line (chat models often wrap CSV text in one)."""
    if completion.startswith("```"):
        newline = completion.find("\n")
        return "" if newline < 0 else completion[newline + 1 :]
    return completion


@dataclass(frozen=True)
class VerbatimMatch:
    """How far a completion reproduces the expected text: characters and whole rows."""

    chars: int
    rows: int
    expected_rows: int


def verbatim_match(expected: str, completion: str, newline: str = "\n") -> VerbatimMatch:
    """Longest verbatim continuation, in characters and in rows.

    A row counts when all of it, up to and including its line terminator, was
    reproduced; the last expected row also counts when the completion stops right
    after it. The first row is whatever remains of a row cut by the prompt.
    """
    chars = common_prefix_length(expected, completion)
    lines = expected.split(newline)
    if lines and lines[-1] == "":
        lines.pop()
    rows = 0
    position = 0
    for index, line in enumerate(lines):
        end = position + len(line)
        is_last = index == len(lines) - 1
        needed = end if is_last else end + len(newline)
        if chars >= needed:
            rows += 1
            position = end + len(newline)
        else:
            break
    return VerbatimMatch(chars=chars, rows=rows, expected_rows=len(lines))


def levenshtein_similarity(a: str, b: str) -> float:
    """1 - normalised Levenshtein distance: 1.0 for equal strings, 0.0 for nothing in common."""
    return float(Levenshtein.normalized_similarity(a, b))
