"""A dataset: its canonical CSV text (what memorization tests read) and a DataFrame view."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from tabmem.data.csvtext import detect_newline, parse_fields, split_records


@dataclass(frozen=True)
class DatasetSpec:
    """What the dataset config says: where the file is and what the data means.

    ``delimiter`` None asks ``load_dataset`` to sniff it from the file's header, and the loaded
    dataset's spec then holds the one found, with ``delimiter_sniffed`` set. ``population``
    names the registered dataset the file's rows were taken from, where it is part of a larger
    table (``tabmem.data.population``)."""

    name: str
    file: str | None = None
    path: str | None = None
    delimiter: str | None = ","
    kind: str = "tabular"
    description: str = ""
    aliases: tuple[str, ...] = ()
    family: str = ""
    target: str | None = None
    user_provided: bool = False
    how_to_get: str | None = None
    population: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    delimiter_sniffed: bool = False

    @property
    def family_name(self) -> str:
        """Datasets of one family are too alike to serve as each other's few-shot examples."""
        return self.family or self.name


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded dataset. ``text`` holds the file's exact characters."""

    spec: DatasetSpec
    path: Path
    text: str

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def delimiter(self) -> str:
        return self.spec.delimiter or ","

    @cached_property
    def newline(self) -> str:
        return detect_newline(self.text)

    @cached_property
    def records(self) -> list[str]:
        """Header first, then every data row, each exactly as in the file."""
        return split_records(self.text)

    @property
    def header(self) -> str:
        return self.records[0]

    @property
    def rows(self) -> list[str]:
        return self.records[1:]

    @property
    def n_rows(self) -> int:
        """How many data rows (``len(rows)`` without copying them)."""
        return len(self.records) - 1

    def row(self, index: int) -> str:
        """Data row ``index`` (0-based) as in the file, without copying every row as ``rows``
        does: a sample test reads thousands of single rows."""
        if not -self.n_rows <= index < self.n_rows:
            raise IndexError(f"row {index} of {self.n_rows}")
        return self.records[index + 1 if index >= 0 else index]

    @cached_property
    def feature_names(self) -> list[str]:
        return parse_fields(self.header, self.delimiter)

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The data as a DataFrame, text values stripped of surrounding whitespace."""
        frame = pd.read_csv(
            io.StringIO(self.text),
            sep=self.delimiter,
            skipinitialspace=True,
            keep_default_na=False,
            na_values=[""],
        )
        for column in frame.columns:
            if not pd.api.types.is_numeric_dtype(frame[column]):
                frame[column] = frame[column].map(lambda v: v.strip() if isinstance(v, str) else v)
        return frame

    def prefix_text(self, n_records: int) -> str:
        """The first ``n_records`` records (header included) as in the file, newline-terminated."""
        return self.newline.join(self.records[:n_records]) + self.newline
