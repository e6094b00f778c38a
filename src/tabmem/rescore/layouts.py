"""The file layouts answers come in, each read into ``Recorded`` lines that a test can locate.

- ``queries``: a run's query table as tabmem logs it (``queries.json``, MLflow's table layout).
- ``published``: CSV with ``prefix,suffix,response``: header splits, row completion windows,
  and feature completion questions, either ``Feature = Value`` lines ending in ``Feature =`` or
  one line ``name = value, name = value`` with the asked ``name = value`` in suffix and answer.
- ``feature-table``: CSV whose header is the dataset's features with the asked one last; each
  line holds a row's other values and, in the last column, the model's answer.
- ``samples``: CSV whose header is the dataset's features, one sampled observation a line.
- ``completions``: CSV of conditional completions, the dataset's features and
  ``num_prefix_features`` = k: the first k values were shown and value k+1 is the answer.
- ``ordered``: CSV whose header is the dataset's first features: every value but the last was
  shown, the last is the answer.

The table layouts are rewritten as the questions they answered (``Name = value`` lines ending in
``Feature =``), so each test locates them as it locates its own queries. Every line of a file
becomes one ``Recorded``: none is dropped here, whatever it holds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tabmem.battery.lifecycle import Recorded
from tabmem.errors import ConfigError, DatasetError
from tabmem.prompts.observations import format_pairs

PUBLISHED_COLUMNS = ("prefix", "suffix", "response")
SHOWN_COUNT = "num_prefix_features"
FORMATS = ("queries", "published", "feature-table", "samples", "completions", "ordered")
TABLE_OF_TEST = {"sample": "samples", "feature_completion": "feature-table"}


def read_transcript(path: Path, layout: str, ignore: Sequence[str] = ()) -> list[Recorded]:
    """The lines of a transcript file in ``layout`` (one of ``FORMATS``); ``ignore`` names
    columns of a feature table that hold parsing artefacts, left out of its questions."""
    if not path.is_file():
        raise DatasetError(f"Transcript file {path} does not exist.")
    if layout == "queries":
        return _read_queries(path)
    readers = {
        "published": _published,
        "feature-table": lambda t: _feature_table(t, ignore),
        "samples": _samples,
        "completions": _completions,
        "ordered": _ordered,
    }
    if layout not in readers:
        choices = ", ".join(FORMATS)
        raise ConfigError(f"Unknown transcript format '{layout}'; choose one of: {choices}.")
    return readers[layout](_read_table(path))


def guess_format(path: Path, test: str | None = None) -> str:
    """``queries`` for a .json file; ``published`` for a CSV with prefix, suffix and response;
    otherwise the table layout the test reads (conditional completion: ``completions`` when the
    file counts the shown features, else ``ordered``)."""
    if path.suffix.lower() == ".json":
        return "queries"
    columns = _header(path)
    if set(PUBLISHED_COLUMNS) <= set(columns) or test is None:
        return "published"
    if test == "conditional_completion":
        return "completions" if SHOWN_COUNT in columns else "ordered"
    return TABLE_OF_TEST.get(test, "published")


@dataclass(frozen=True)
class Table:
    """A CSV file's header and its lines as text, every value as written (no missing-value
    parsing: ``nan`` stays ``nan``)."""

    path: Path
    columns: list[str]
    lines: list[list[str]]


def _read_table(path: Path) -> Table:
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise DatasetError(f"{path} is not a readable CSV file: {exc}") from exc
    columns = [str(c).strip() for c in frame.columns]
    return Table(path, columns, frame.to_numpy(dtype=str).tolist())


def _header(path: Path) -> list[str]:
    if not path.is_file():
        raise DatasetError(f"Transcript file {path} does not exist.")
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, nrows=0)
    except (ValueError, pd.errors.ParserError) as exc:
        raise DatasetError(f"{path} is not a readable CSV file: {exc}") from exc
    return [str(c).strip() for c in frame.columns]


def _read_queries(path: Path) -> list[Recorded]:
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
        rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise DatasetError(
            f"{path} is not a query table as tabmem logs it (JSON with 'columns' and 'data'): {exc}"
        ) from exc
    return [
        Recorded(
            prompt=str(row.get("prompt", "")),
            prefix=str(row.get("prefix") or row.get("prompt", "")),
            suffix=str(row.get("expected", "")),
            response=str(row.get("completion", "")),
            error=str(row["error"]) if row.get("error") else None,
            line=i,
        )
        for i, row in enumerate(rows, start=1)
    ]


def _published(table: Table) -> list[Recorded]:
    missing = [c for c in PUBLISHED_COLUMNS if c not in table.columns]
    if missing:
        raise DatasetError(
            f"{table.path} lacks the column(s) {', '.join(missing)} of the published layout "
            f"({','.join(PUBLISHED_COLUMNS)})."
        )
    at = [table.columns.index(c) for c in PUBLISHED_COLUMNS]
    return [
        Recorded(prompt=v[at[0]], prefix=v[at[0]], suffix=v[at[1]], response=v[at[2]], line=i)
        for i, v in enumerate(table.lines, start=1)
    ]


def question_text(names: Sequence[str], values: Sequence[str], asked: str) -> str:
    """The question a table line answered: its shown values as ``Name = value`` lines, then
    ``asked =``."""
    shown = format_pairs(names, values)
    return f"{shown}\n{asked} =" if shown else f"{asked} ="


def _feature_table(table: Table, ignore: Sequence[str]) -> list[Recorded]:
    if len(table.columns) < 2:
        raise DatasetError(f"{table.path} has fewer than two columns: it is no feature table.")
    asked = table.columns[-1]
    unknown = sorted(set(ignore) - set(table.columns))
    if unknown or asked in ignore:
        raise ConfigError(
            f"The columns to ignore must be shown columns of {table.path}; "
            f"{', '.join(unknown) or asked} is not."
        )
    kept = [j for j, name in enumerate(table.columns[:-1]) if name not in ignore]
    names = [table.columns[j] for j in kept]
    out = []
    for i, values in enumerate(table.lines, start=1):
        text = question_text(names, [values[j] for j in kept], asked)
        out.append(Recorded(prompt=text, prefix=text, suffix="", response=values[-1], line=i))
    return out


def _samples(table: Table) -> list[Recorded]:
    return [
        Recorded(
            prompt="", prefix="", suffix="", response=format_pairs(table.columns, values), line=i
        )
        for i, values in enumerate(table.lines, start=1)
    ]


def _completions(table: Table) -> list[Recorded]:
    if SHOWN_COUNT not in table.columns:
        raise DatasetError(
            f"{table.path} lacks the column {SHOWN_COUNT} of conditional completions."
        )
    at = table.columns.index(SHOWN_COUNT)
    names = [c for j, c in enumerate(table.columns) if j != at]
    out = []
    for i, line in enumerate(table.lines, start=1):
        values = [v for j, v in enumerate(line) if j != at]
        shown = line[at].strip()
        if not shown.isdigit() or int(shown) >= len(names):
            text = f"{SHOWN_COUNT} = {shown}"
            out.append(Recorded(prompt=text, prefix=text, suffix="", response="", line=i))
            continue
        k = int(shown)
        text = question_text(names[:k], values[:k], names[k])
        out.append(Recorded(prompt=text, prefix=text, suffix="", response=values[k], line=i))
    return out


def _ordered(table: Table) -> list[Recorded]:
    names = table.columns
    out = []
    for i, values in enumerate(table.lines, start=1):
        text = question_text(names[:-1], values[:-1], names[-1])
        out.append(Recorded(prompt=text, prefix=text, suffix="", response=values[-1], line=i))
    return out
