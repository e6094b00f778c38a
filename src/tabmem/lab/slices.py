"""Several lab files cut from one large file: many files per depth, and never-read siblings.

A setting's ``slices`` section cuts ``count`` files of ``rows`` consecutive data rows each
(the header first, rows exactly as in the source) from one registered dataset, from data row
``start`` on, and adds them to the lab's pool as ``<source>-part<k>``. Two things follow:

- several files per depth, so an exposure curve counts files rather than one file a depth;
- the strictest negative the lab has: a part never read, whose siblings were. A model that
  read the other parts knows the source's distribution, format and domain, and has never seen
  this part's rows.

Each part names the source as its ``population`` (``tabmem.data.population``): its twin and
the blind checks' data-only rules are fitted on the source's other rows too, as they would be
were the whole source the file tested, not on the part's 50 rows alone.

The parts are written as CSV files with dataset configs (``<root>/data/``,
``<root>/conf/dataset/``), found by the sweep through Hydra's search path like the lab's
model configs; the source itself is never read as the stream's other text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.data.registry import spec_config
from tabmem.errors import ConfigError


@dataclass(frozen=True)
class Slices:
    """``count`` parts of ``rows`` consecutive data rows of ``source``, from data row ``start``
    (0-based) on."""

    source: str
    rows: int
    count: int
    start: int = 0

    @property
    def names(self) -> list[str]:
        return [f"{self.source}-part{k + 1}" for k in range(self.count)]

    def first(self, part: int) -> int:
        """The 0-based data row part ``part`` (0-based) begins with."""
        return self.start + part * self.rows

    def texts(self, data: Dataset) -> dict[str, str]:
        """Each part's text: the source's header, then its rows, exactly as in the file."""
        if self.first(self.count) > data.n_rows:
            raise ConfigError(
                f"The lab's slices need {self.rows * self.count} rows of '{self.source}' from "
                f"row {self.start}, and it has {data.n_rows}."
            )
        out = {}
        for k, name in enumerate(self.names):
            rows = data.records[1 + self.first(k) : 1 + self.first(k) + self.rows]
            out[name] = data.newline.join([data.header, *rows]) + data.newline
        return out


def load_slices(cfg: Mapping[str, Any] | None) -> Slices | None:
    """The setting's ``slices`` section (None where it has none)."""
    if not cfg:
        return None
    source = str(cfg.get("source", ""))
    if source not in dataset_specs():
        raise ConfigError(f"The lab's slices name an unknown source dataset '{source}'.")
    rows, count, start = int(cfg.get("rows", 0)), int(cfg.get("count", 0)), int(cfg.get("start", 0))
    if rows < 2 or count < 2 or start < 0:
        raise ConfigError(
            "The lab's slices need rows >= 2, count >= 2 and start >= 0 "
            f"(got rows {rows}, count {count}, start {start})."
        )
    return Slices(source, rows, count, start)


def write_slices(slices: Slices, root: Path) -> dict[str, DatasetSpec]:
    """Write every part's file and dataset config (the source's, renamed and pointed at the
    part) under ``root``; their specs by name."""
    source = dataset_specs()[slices.source]
    texts = slices.texts(load_dataset(source))
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "conf" / "dataset").mkdir(parents=True, exist_ok=True)
    specs = {}
    for k, (name, text) in enumerate(texts.items()):
        path = (root / "data" / f"{name}.csv").resolve()
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8", newline="")
        first = slices.first(k)
        spec = replace(
            source,
            name=name,
            file=None,
            path=str(path),
            population=slices.source,
            description=f"Data rows {first + 1}-{first + slices.rows} of {slices.source}: "
            + source.description,
        )
        header = f"# A lab part of {slices.source} (tabmem.lab.slices), written by the lab.\n"
        target = root / "conf" / "dataset" / f"{name}.yaml"
        config = spec_config(spec)
        target.write_text(header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
        specs[name] = spec
    return specs
