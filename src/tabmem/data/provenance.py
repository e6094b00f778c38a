"""Where each shipped data file comes from, and checks that the files are still those bytes.

``data/provenance.json`` is the source of truth: people write the descriptive fields (source,
licence, notes); ``sha256``, ``rows`` and ``columns`` are measured from the files. Tests of
memorization compare model output with these exact bytes, so a silently changed file (a
re-encoded line ending, a "fixed" typo) would change every result: the check catches that.
``data/PROVENANCE.md`` is rendered from the JSON so the two never disagree.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from tabmem.data.csvtext import parse_fields, split_records
from tabmem.paths import data_dir

JSON_NAME = "provenance.json"
MARKDOWN_NAME = "PROVENANCE.md"


@dataclass(frozen=True)
class ShippedFile:
    """One CSV file under ``data/``: what it is, where it came from, and its measured identity."""

    dataset: str
    file: str
    source: str
    licence: str
    sha256: str
    rows: int
    columns: int
    notes: str = ""


@dataclass(frozen=True)
class UserProvidedFile:
    """A dataset we may not ship; ``reference_sha256`` names the copy the papers used, if known."""

    dataset: str
    source: str
    licence: str
    reference_sha256: str | None = None
    rows: int | None = None
    notes: str = ""


@dataclass(frozen=True)
class Provenance:
    files: tuple[ShippedFile, ...]
    user_provided: tuple[UserProvidedFile, ...] = ()

    def by_file(self) -> dict[str, ShippedFile]:
        return {f.file: f for f in self.files}


@dataclass(frozen=True)
class Measurement:
    sha256: str
    rows: int
    columns: int


def measure(path: Path, delimiter: str = ",") -> Measurement:
    """The file's sha256, its number of data records (header excluded) and header width."""
    raw = path.read_bytes()
    records = split_records(raw.decode("utf-8").removeprefix("\ufeff"))
    columns = len(parse_fields(records[0], delimiter)) if records else 0
    return Measurement(
        sha256=hashlib.sha256(raw).hexdigest(),
        rows=max(len(records) - 1, 0),
        columns=columns,
    )


def _build(cls: type, raw: dict[str, Any]) -> Any:
    names = {f.name for f in fields(cls)}
    unknown = set(raw) - names
    if unknown:
        raise ValueError(f"{cls.__name__} entry has unknown keys {sorted(unknown)}")
    return cls(**raw)


def load_provenance(path: Path | None = None) -> Provenance:
    """Read ``data/provenance.json`` (or ``path``)."""
    path = path or data_dir() / JSON_NAME
    raw = json.loads(path.read_text(encoding="utf-8"))
    return Provenance(
        files=tuple(_build(ShippedFile, entry) for entry in raw["files"]),
        user_provided=tuple(
            _build(UserProvidedFile, entry) for entry in raw.get("user_provided", [])
        ),
    )


def dump_provenance(provenance: Provenance) -> str:
    """The JSON text for ``provenance``: stable key order, one trailing newline."""
    payload = {
        "files": [asdict(f) for f in provenance.files],
        "user_provided": [asdict(u) for u in provenance.user_provided],
    }
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def config_delimiters() -> dict[str, str]:
    """Each configured dataset's delimiter, so files are measured the way they are loaded."""
    from tabmem.data.registry import dataset_specs

    return {name: spec.delimiter for name, spec in dataset_specs().items()}


def refresh(provenance: Provenance, directory: Path, delimiters: dict[str, str]) -> Provenance:
    """``provenance`` with sha256, rows and columns re-measured from the files in ``directory``."""
    files = []
    for entry in provenance.files:
        m = measure(directory / entry.file, delimiters.get(entry.dataset, ","))
        files.append(replace(entry, sha256=m.sha256, rows=m.rows, columns=m.columns))
    return replace(provenance, files=tuple(files))


def check(provenance: Provenance, directory: Path, delimiters: dict[str, str]) -> list[str]:
    """One sentence per problem: a listed file missing or changed, or a CSV file not listed."""
    problems = []
    for entry in provenance.files:
        path = directory / entry.file
        if not path.is_file():
            problems.append(f"{entry.file}: listed in {JSON_NAME} but missing from {directory}.")
            continue
        m = measure(path, delimiters.get(entry.dataset, ","))
        for name in ("sha256", "rows", "columns"):
            recorded, actual = getattr(entry, name), getattr(m, name)
            if recorded != actual:
                problems.append(
                    f"{entry.file}: {name} is {actual}, {JSON_NAME} records {recorded}."
                )
    listed = provenance.by_file()
    for path in sorted(directory.glob("*.csv")):
        if path.name not in listed:
            problems.append(f"{path.name}: not listed in {JSON_NAME}; add its source and licence.")
    markdown = directory / MARKDOWN_NAME
    if not markdown.is_file() or markdown.read_text(encoding="utf-8") != render_markdown(
        provenance
    ):
        problems.append(f"{MARKDOWN_NAME} is out of date; run scripts/data_provenance.py --write.")
    return problems


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(provenance: Provenance) -> str:
    """The human-readable table of ``data/PROVENANCE.md``, generated from the JSON."""
    lines = [
        "# Data provenance",
        "",
        f"Generated from `{JSON_NAME}` by `scripts/data_provenance.py --write`; edit the JSON,",
        "not this file. `python scripts/data_provenance.py` checks every file still has the",
        "recorded sha256 and size. Rows count data records, header excluded.",
        "",
        "## Shipped files",
        "",
        "| Dataset | File | Rows | Columns | Licence | Source |",
        "|---|---|---:|---:|---|---|",
    ]
    for f in provenance.files:
        lines.append(
            f"| {f.dataset} | `{f.file}` | {f.rows} | {f.columns} | {_cell(f.licence)} "
            f"| {_cell(f.source)} |"
        )
    lines += ["", "### sha256 and notes", ""]
    for f in provenance.files:
        lines.append(f"- `{f.file}` `{f.sha256}`" + (f": {_cell(f.notes)}" if f.notes else ""))
    lines += [
        "",
        "## Datasets you provide",
        "",
        "Pass the file with `dataset=<name> dataset.path=/path/to/file.csv`.",
        "",
        "| Dataset | Rows | Licence | Source | Reference sha256 |",
        "|---|---:|---|---|---|",
    ]
    for u in provenance.user_provided:
        rows = "" if u.rows is None else str(u.rows)
        digest = f"`{u.reference_sha256}`" if u.reference_sha256 else "unknown"
        lines.append(
            f"| {u.dataset} | {rows} | {_cell(u.licence)} | {_cell(u.source)} | {digest} |"
        )
    notes = [u for u in provenance.user_provided if u.notes]
    if notes:
        lines += [""]
        lines += [f"- {u.dataset}: {_cell(u.notes)}" for u in notes]
    return "\n".join(lines) + "\n"
