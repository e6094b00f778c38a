"""The dataset registry: configs under ``conf/dataset/`` and loading with clear errors."""

from __future__ import annotations

import csv
import io
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tabmem.data.csvtext import sniff_delimiter
from tabmem.data.dataset import Dataset, DatasetSpec
from tabmem.errors import ConfigError, DatasetError
from tabmem.paths import conf_dir, data_dir

_SPEC_FIELDS = set(DatasetSpec.__dataclass_fields__) - {"extra", "delimiter_sniffed"}
_log = logging.getLogger(__name__)
_LOADED_LIMIT = 32
_memo_lock = threading.Lock()
_specs_memo: dict[tuple, dict[str, DatasetSpec]] = {}
_loaded_memo: OrderedDict[tuple, Dataset] = OrderedDict()


def _stamp(path: Path) -> tuple[str, int, int]:
    """A file's identity for the memos below: path, modification time and size."""
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


def spec_from_config(cfg: Mapping[str, Any]) -> DatasetSpec:
    """Build a spec from a dataset config; unknown keys are kept in ``extra``."""
    raw = dict(cfg)
    known = {k: raw.pop(k) for k in list(raw) if k in _SPEC_FIELDS}
    if "name" not in known:
        raise ConfigError("A dataset config has no 'name'; every file in conf/dataset/ needs one.")
    known["aliases"] = tuple(known.get("aliases") or ())
    return DatasetSpec(**known, extra=raw)


def spec_config(spec: DatasetSpec) -> dict[str, Any]:
    """A spec as a dataset config again (``spec_from_config``'s inverse): its fields, then
    the keys it kept in ``extra``."""
    known = {name: getattr(spec, name) for name in DatasetSpec.__dataclass_fields__}
    known = {k: v for k, v in known.items() if k in _SPEC_FIELDS}
    return {**known, "aliases": list(spec.aliases), **spec.extra}


def dataset_specs(directory: Path | None = None) -> dict[str, DatasetSpec]:
    """Every dataset config in ``conf/dataset/``, by name (parsed again only when a file changed:
    few-shot builders ask for them once per query batch)."""
    directory = directory or conf_dir() / "dataset"
    paths = sorted(directory.glob("*.yaml"))
    key = tuple(_stamp(path) for path in paths)
    with _memo_lock:
        known = _specs_memo.get(key)
    if known is not None:
        return dict(known)
    specs = {}
    for path in paths:
        cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        if isinstance(cfg, dict) and "name" in cfg:
            spec = spec_from_config(cfg)
            specs[spec.name] = spec
    with _memo_lock:
        _specs_memo.clear()
        _specs_memo[key] = specs
    return dict(specs)


def resolve_path(spec: DatasetSpec) -> Path:
    """Where the dataset's file is, or a one-sentence error saying how to provide it."""
    if spec.path:
        path = Path(spec.path).expanduser()
        if not path.is_file():
            raise DatasetError(
                f"Dataset '{spec.name}': no file at {path}; "
                "check that dataset.path= points to the CSV file."
            )
        return path
    if spec.file:
        path = Path(spec.file)
        path = path if path.is_absolute() else data_dir() / path
        if path.is_file():
            return path
    hint = spec.how_to_get or "pass its CSV file with dataset.path=/path/to/file.csv"
    raise DatasetError(f"Dataset '{spec.name}' needs a file you provide: {hint}")


def read_canonical_text(path: Path, name: str) -> str:
    """The file's exact text, decoded as UTF-8 with line endings kept."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"Dataset '{name}': cannot read {path} ({exc.strerror}).") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(
            f"Dataset '{name}': {path} is not UTF-8 text (byte {exc.start}); "
            "save it as a UTF-8 CSV."
        ) from exc
    return text.removeprefix("\ufeff")


_DELIMITER_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}
_DELIMITER_SPELLINGS = {"\\t": "\t", "tab": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}


def delimiter_note(delimiter: str) -> str:
    """One sentence on a delimiter read from the file's header, and how to set another."""
    shown = _DELIMITER_NAMES.get(delimiter, repr(delimiter))
    return (
        f"fields read as {shown}-separated (sniffed from the header); to read them otherwise, "
        "set dataset.delimiter, quoted for Hydra ('dataset.delimiter=\";\"', dataset.delimiter=tab)"
    )


def resolve_delimiter(spec: DatasetSpec, text: str) -> DatasetSpec:
    """The spec with one delimiter character: the configured one (``tab`` and ``\\t`` mean a
    tab), or, where it is null, the one sniffed from ``text``'s header (``load_dataset`` says
    which once the file has passed its checks)."""
    if not spec.delimiter:
        return replace(spec, delimiter=sniff_delimiter(text), delimiter_sniffed=True)
    delimiter = _DELIMITER_SPELLINGS.get(spec.delimiter.lower(), spec.delimiter)
    if len(delimiter) != 1:
        raise DatasetError(
            f"Dataset '{spec.name}': dataset.delimiter must be one character, not "
            f"{spec.delimiter!r}; write it quoted for Hydra ('dataset.delimiter=\";\"'), "
            "dataset.delimiter=tab, or null to sniff it from the header."
        )
    return spec if delimiter == spec.delimiter else replace(spec, delimiter=delimiter)


def validate_csv(text: str, delimiter: str, name: str, path: Path) -> None:
    """Reject empty, header-only, NUL-containing or ragged CSV text with one sentence."""
    if not text.strip():
        raise DatasetError(f"Dataset '{name}': {path} is empty.")
    if "\x00" in text:
        raise DatasetError(
            f"Dataset '{name}': {path} contains NUL bytes; it is not a CSV text file."
        )
    try:
        rows = list(csv.reader(io.StringIO(text), delimiter=delimiter, strict=True))
    except csv.Error as exc:
        raise DatasetError(f"Dataset '{name}': {path} is not valid CSV ({exc}).") from exc
    rows = [r for r in rows if r]
    if len(rows) < 2:
        raise DatasetError(f"Dataset '{name}': {path} has a header but no data rows.")
    width = len(rows[0])
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            raise DatasetError(
                f"Dataset '{name}': record {number} of {path} has {len(row)} fields "
                f"but the header has {width}; fix the file or its delimiter."
            )


def load_dataset(cfg: Mapping[str, Any] | DatasetSpec) -> Dataset:
    """Load a dataset from its config (or spec), checking the file is a well-formed CSV.

    The same spec over an unchanged file gives the same (immutable) ``Dataset`` again, so a
    process that builds many prompts reads, checks and splits each file once.
    """
    spec = cfg if isinstance(cfg, DatasetSpec) else spec_from_config(cfg)
    path = resolve_path(spec)
    key = (repr(spec), *_stamp(path))
    with _memo_lock:
        if key in _loaded_memo:
            _loaded_memo.move_to_end(key)
            return _loaded_memo[key]
    text = read_canonical_text(path, spec.name)
    spec = resolve_delimiter(spec, text)
    validate_csv(text, spec.delimiter, spec.name, path)
    if spec.delimiter_sniffed:  # said of a file that is read, not before saying it is empty
        _log.info("Dataset '%s': %s", spec.name, delimiter_note(spec.delimiter))
    dataset = Dataset(spec=spec, path=path, text=text)
    with _memo_lock:
        _loaded_memo[key] = dataset
        while len(_loaded_memo) > _LOADED_LIMIT:
            _loaded_memo.popitem(last=False)
    return dataset
