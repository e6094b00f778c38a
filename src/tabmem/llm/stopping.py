"""Stop generating once the rest of a completion cannot change its score.

Two rules, one per way the tests score a generation:

- ``verbatim`` (the header test): the answer is scored by how much of the expected text it
  reproduces from its start (after a leading Markdown fence line). Once it differs, nothing
  later counts, so generation ends at the end of the line on which it first differs, or once
  that line has grown longer than any line of the expected text (small models repeat
  ``1.1,1.1,…`` without end); the record still shows what the model wrote instead. It also
  ends once all the expected text was written.
- ``first_row`` (row completion, first token): only the first CSV row the answer writes is
  scored (``tabmem.stats.answers.first_csv_row``), so generation ends with that row's line.

``end`` says where a completion's score became settled; ``cut`` keeps the text up to there.
Both rules settle on a prefix where they settle on the whole text, so a backend that stops
early and one that writes everything give the same cut answer.
Every backend's answer is cut by the same rule (the embedded backend also stops generating
there, and streaming HTTP providers have their stream closed), so the score of a cut answer is
the score the whole answer would have had, by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.stats.answers import is_first_row_line
from tabmem.stats.scoring import common_prefix_length

FENCE = "```"


@dataclass(frozen=True)
class StopRule:
    """When a completion's score is settled; part of the request's cache key."""

    kind: str
    expected: str = ""
    header: str = ""
    delimiter: str = ","

    @classmethod
    def verbatim(cls, expected: str) -> StopRule:
        return cls("verbatim", expected=expected)

    @classmethod
    def first_row(cls, header: str, delimiter: str) -> StopRule:
        return cls("first_row", header=header, delimiter=delimiter)

    def end(self, text: str) -> int | None:
        """Characters of ``text`` that settle its score, or None while more text could count."""
        if self.kind == "verbatim":
            return _verbatim_end(self.expected, text)
        if self.kind == "first_row":
            return _first_row_end(text, self.header, self.delimiter)
        raise ValueError(f"unknown stop rule {self.kind!r}")

    def cut(self, text: str) -> str:
        """``text`` up to where its score is settled (all of it when it never is)."""
        end = self.end(text)
        return text if end is None else text[:end]

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "expected": self.expected,
            "header": self.header,
            "delimiter": self.delimiter,
        }


def _line_end(text: str, start: int) -> int | None:
    """The index just past the newline at or after ``start``; None when the line is open."""
    newline = text.find("\n", start)
    return None if newline < 0 else newline + 1


def _verbatim_end(expected: str, text: str) -> int | None:
    offset = 0
    if text.startswith(FENCE):
        fence_end = _line_end(text, 0)
        if fence_end is None:
            return None
        offset = fence_end
    elif FENCE.startswith(text):
        return None
    answer = text[offset:]
    matched = common_prefix_length(expected, answer)
    if matched >= len(expected):
        return offset + len(expected)
    if matched == len(answer):
        return None
    line_start = answer.rfind("\n", 0, matched) + 1
    cap = line_start + max(len(line) for line in expected.split("\n")) + 1
    end = _line_end(answer, matched)
    if end is not None and end <= cap:
        return offset + end
    return offset + cap if len(answer) >= cap else None


def _first_row_end(text: str, header: str, delimiter: str) -> int | None:
    position = 0
    while (end := _line_end(text, position)) is not None:
        if is_first_row_line(text[position:end], header, delimiter):
            return end
        position = end
    return None


def cut_at_stops(text: str, stops: Sequence[str]) -> str:
    """``text`` up to the first of ``stops`` it holds, as a provider cuts at stop sequences."""
    cuts = [text.find(stop) for stop in stops if stop and stop in text]
    return text[: min(cuts)] if cuts else text
