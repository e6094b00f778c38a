"""Other text a lab model reads between its planted files, as a model reads a file in pretraining.

Real contamination is mostly a file read a few times among much other text. A lab setting
with a ``stream`` section reads, in every pass, ``ratio`` tokens of other text per token of
planted file, drawn at random each pass from sources that need no network:

- ``code``: windows of the Python standard library's modules (the interpreter's own files);
- ``prose``: the standard library's docstrings, English sentences about code;
- ``tables``: windows of rows, header first, of this package's CSV files outside the lab's
  pool (so no file the lab tests is ever read as other text).

The documents are shuffled among the pass's planted files; each is read as its own blocks.
"""

from __future__ import annotations

import ast
import random
import sysconfig
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tabmem.data import dataset_specs, load_dataset
from tabmem.data.registry import resolve_path
from tabmem.errors import ConfigError, DatasetError

SOURCES = ("code", "prose", "tables")
WINDOW_CHARS = 4000
"""The longest document drawn: about a thousand tokens, a few training blocks."""


@dataclass(frozen=True)
class Stream:
    """How much other text a pass reads (tokens per planted token) and from which sources;
    ``tables``: the datasets whose rows are the tables source."""

    ratio: float
    sources: tuple[str, ...]
    tables: tuple[str, ...]


def load_stream(cfg: Mapping[str, Any] | None, pool: Sequence[str]) -> Stream | None:
    """The setting's ``stream`` section (None where it has none)."""
    if not cfg:
        return None
    ratio = float(cfg.get("ratio", 1.0))
    sources = tuple(str(s) for s in cfg.get("sources") or SOURCES)
    unknown = sorted(set(sources) - set(SOURCES))
    if ratio <= 0 or unknown or not sources:
        raise ConfigError(
            f"The lab's stream needs a ratio > 0 and sources among {', '.join(SOURCES)} "
            f"(got ratio {ratio}, sources {list(sources)})."
        )
    tables = ()
    if "tables" in sources:
        tables = tuple(d for d in _local_tables() if d not in pool)
    if "tables" in sources and not tables:
        raise ConfigError("The lab's stream reads tables, but every local CSV is in its pool.")
    return Stream(ratio, sources, tables)


@cache
def _local_tables() -> tuple[str, ...]:
    """The registered tabular datasets whose file ships with the package (found, not read)."""
    names = []
    for name, spec in dataset_specs().items():
        try:
            if spec.kind != "series" and resolve_path(spec):
                names.append(name)
        except DatasetError:  # a file the user provides: not here
            continue
    return tuple(names)


@cache
def _modules() -> tuple[Path, ...]:
    return tuple(sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")))


def _window(text: str, rng: random.Random) -> str:
    """A random stretch of ``text`` of at most ``WINDOW_CHARS``, from a line's start."""
    if len(text) <= WINDOW_CHARS:
        return text
    start = text.rfind("\n", 0, rng.randrange(len(text) - WINDOW_CHARS)) + 1
    return text[start : start + WINDOW_CHARS]


def _code(rng: random.Random, stream: Stream) -> str:
    return _window(rng.choice(_modules()).read_text(encoding="utf-8", errors="replace"), rng)


def _prose(rng: random.Random, stream: Stream) -> str:
    source = rng.choice(_modules()).read_text(encoding="utf-8", errors="replace")
    try:
        nodes = [n for n in ast.walk(ast.parse(source)) if isinstance(n, _DOCUMENTED)]
    except SyntaxError:  # a module of another Python version: no prose from it
        return ""
    docs = [d for n in nodes if (d := ast.get_docstring(n))]
    return _window("\n\n".join(docs), rng)


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


@cache
def _records(name: str) -> tuple[str, tuple[str, ...], int]:
    """A table's line break, records (header first) and mean characters a record."""
    data = load_dataset(dataset_specs()[name])
    records = tuple(data.records)
    return data.newline, records, max(1, len(data.text) // len(records))


def _table(rng: random.Random, stream: Stream) -> str:
    newline, records, width = _records(rng.choice(stream.tables))
    count = max(1, min(len(records) - 1, WINDOW_CHARS // width))
    start = rng.randrange(1, len(records) - count + 1)
    return newline.join([records[0], *records[start : start + count]]) + newline


_DRAW: dict[str, Callable[[random.Random, Stream], str]] = {
    "code": _code,
    "prose": _prose,
    "tables": _table,
}


def other_documents(
    stream: Stream, tokens: int, count: Callable[[str], int], rng: random.Random
) -> list[str]:
    """Documents of other text, each from a source drawn in turn at random, until they hold
    ``tokens`` tokens (``count``: a document's tokens)."""
    documents: list[str] = []
    total = 0
    while total < tokens:
        text = _DRAW[rng.choice(stream.sources)](rng, stream)
        if text.strip():
            documents.append(text)
            total += count(text)
    return documents
