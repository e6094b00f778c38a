"""Exact CSV text handling: records split the way a CSV reader would, bytes kept as-is."""

from __future__ import annotations

import csv
import io

# Free-text fields can be long; the csv module's default limit (131072 characters) would
# reject valid files.
csv.field_size_limit(2**31 - 1)


def split_records(text: str) -> list[str]:
    """Split CSV text into records without their line terminators.

    A newline inside a quoted field does not end a record, so each returned string
    is one whole CSV record exactly as it appears in the file. A newline ends a record
    when the quotes since the record's start are balanced (an even count: an escaped
    ``""`` counts twice); lines are found with ``str.find``, so large files split fast.
    """
    records: list[str] = []
    start = 0
    position = 0
    quotes = 0
    while (newline := text.find("\n", position)) >= 0:
        quotes += text.count('"', position, newline)
        position = newline + 1
        if quotes % 2:
            continue
        end = newline - 1 if newline > start and text[newline - 1] == "\r" else newline
        records.append(text[start:end])
        start = position
        quotes = 0
    if start < len(text):
        tail = text[start:]
        records.append(tail[:-1] if tail.endswith("\r") else tail)
    return records


def detect_newline(text: str) -> str:
    """The file's line terminator: ``\\r\\n`` if its first line ends so, else ``\\n``."""
    first = text.find("\n")
    if first > 0 and text[first - 1] == "\r":
        return "\r\n"
    return "\n"


DELIMITERS = (",", ";", "\t", "|")
"""The delimiters a file's header is sniffed for, in the order that breaks ties."""
_SNIFF_RECORDS = 20


def sniff_delimiter(text: str) -> str:
    """The delimiter of CSV ``text``, one of ``DELIMITERS``, read from its header and first
    records: the one that splits every one of them into the same number of fields (more than
    one), the most fields winning; else the one that splits the header most; else a comma."""
    records = [r for r in split_records(text[: 1 << 16])[:_SNIFF_RECORDS] if r.strip()]
    if not records:
        return ","
    if len(records) > 1 and not text[: 1 << 16].endswith(("\n", "\r")):
        records = records[:-1]  # the last record may be cut at the sample's end
    best, best_width = ",", 1
    for delimiter in DELIMITERS:
        widths = {len(parse_fields(r, delimiter)) for r in records}
        if len(widths) == 1 and (width := widths.pop()) > best_width:
            best, best_width = delimiter, width
    if best_width > 1:
        return best
    header = max(DELIMITERS, key=lambda d: len(parse_fields(records[0], d)))
    return header if len(parse_fields(records[0], header)) > 1 else ","


def parse_fields(record: str, delimiter: str = ",") -> list[str]:
    """The fields of one CSV record, unquoted, whitespace kept."""
    rows = list(csv.reader(io.StringIO(record), delimiter=delimiter))
    return rows[0] if rows else []


def raw_fields(record: str, delimiter: str = ",") -> list[str]:
    """The fields of one CSV record exactly as written (quotes kept), split at delimiters
    outside quotes: what a model sees and must reproduce, unlike ``parse_fields``."""
    if '"' not in record:
        return record.split(delimiter)
    fields, start, quoted = [], 0, False
    for i, char in enumerate(record):
        if char == '"':
            quoted = not quoted
        elif char == delimiter and not quoted:
            fields.append(record[start:i])
            start = i + 1
    fields.append(record[start:])
    return fields
