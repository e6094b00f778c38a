"""Exact CSV text handling: records split the way a CSV reader would, bytes kept as-is."""

from __future__ import annotations

import csv
import io


def split_records(text: str) -> list[str]:
    """Split CSV text into records without their line terminators.

    A newline inside a quoted field does not end a record, so each returned string
    is one whole CSV record exactly as it appears in the file.
    """
    records: list[str] = []
    start = 0
    in_quotes = False
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            in_quotes = not in_quotes
        elif ch == "\n" and not in_quotes:
            end = i - 1 if i > start and text[i - 1] == "\r" else i
            records.append(text[start:end])
            start = i + 1
        i += 1
    if start < n:
        tail = text[start:]
        records.append(tail[:-1] if tail.endswith("\r") else tail)
    return records


def detect_newline(text: str) -> str:
    """The file's line terminator: ``\\r\\n`` if its first line ends so, else ``\\n``."""
    first = text.find("\n")
    if first > 0 and text[first - 1] == "\r":
        return "\r\n"
    return "\n"


def parse_fields(record: str, delimiter: str = ",") -> list[str]:
    """The fields of one CSV record, unquoted, whitespace kept."""
    rows = list(csv.reader(io.StringIO(record), delimiter=delimiter))
    return rows[0] if rows else []
