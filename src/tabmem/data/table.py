"""A dataset as raw text fields (exact strings, whitespace kept), and back to CSV text."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, replace

from tabmem.data.dataset import Dataset


@dataclass(frozen=True)
class RawTable:
    """Header and rows as the file's fields, unquoted but otherwise exact."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    delimiter: str
    newline: str

    @classmethod
    def from_dataset(cls, dataset: Dataset) -> RawTable:
        reader = csv.reader(io.StringIO(dataset.text, newline=""), delimiter=dataset.delimiter)
        records = [tuple(r) for r in reader if r]
        return cls(tuple(records[0]), tuple(records[1:]), dataset.delimiter, dataset.newline)

    def column(self, index: int) -> list[str]:
        return [row[index] for row in self.rows]

    def columns(self) -> list[list[str]]:
        return [self.column(j) for j in range(len(self.header))]

    def with_columns(self, columns: list[list[str]], header: list[str] | None = None) -> RawTable:
        """A table with every column replaced (and, if given, a new header)."""
        rows = tuple(zip(*columns, strict=True)) if columns else ()
        return replace(self, header=tuple(header or self.header), rows=rows)

    def to_text(self) -> str:
        """CSV text with the table's delimiter and line terminator, quoting only where needed."""
        buffer = io.StringIO(newline="")
        writer = csv.writer(buffer, delimiter=self.delimiter, lineterminator=self.newline)
        writer.writerow(self.header)
        writer.writerows(self.rows)
        return buffer.getvalue()
