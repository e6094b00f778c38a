"""The lab's plan: which datasets are planted how often, and what the model reads in each pass.

The choice is seeded: the same lab config gives the same planted datasets, the same
repetition counts and the same training order. In pass ``p`` (1-based) every planted dataset
whose repetition count is at least ``p`` is read once, in a seeded order; so after pass ``p`` a
dataset planted ``r`` times has been read ``min(p, r)`` times, and a checkpoint saved after
pass ``p`` is a model that has seen each planted file exactly that often. A setting may plant
only the header and first rows of a file (``first_rows``): the pattern the papers found on
Adult and California Housing, and a real model that knows a share of a file's rows; and it may
read other text between the files (``stream``, ``tabmem.lab.stream``), as pretraining does;
and its pool may hold parts of one large file (``slices``, ``tabmem.lab.slices``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tabmem.data import Dataset
from tabmem.errors import ConfigError
from tabmem.lab.slices import Slices, load_slices
from tabmem.lab.stream import Stream, load_stream
from tabmem.paths import conf_dir


@dataclass(frozen=True)
class LabPlan:
    """Planted datasets with their repetition counts, held-out datasets, checkpoints, the
    planted datasets of which only the first rows are read (dataset -> data rows), the
    other text read beside them (None: the planted files alone) and the large file whose
    parts are in the pool (None: whole files only)."""

    name: str
    planted: dict[str, int]
    held_out: list[str]
    checkpoints: list[int]
    first_rows: dict[str, int] = field(default_factory=dict)
    stream: Stream | None = None
    slices: Slices | None = None

    @property
    def passes(self) -> int:
        return max([*self.planted.values(), *self.checkpoints, 0])

    def seen(self, dataset: str, passes: int) -> int:
        """How often a checkpoint saved after ``passes`` passes has read this dataset."""
        return min(passes, self.planted.get(dataset, 0))

    def schedule(self, seed: int) -> list[list[str]]:
        """The datasets read in each pass, in a seeded order."""
        rng = random.Random(seed)
        order = []
        for p in range(1, self.passes + 1):
            chosen = sorted(d for d, r in self.planted.items() if r >= p)
            rng.shuffle(chosen)
            order.append(chosen)
        return order

    def planted_text(self, dataset: Dataset) -> str:
        """The text the model reads of a planted dataset: the whole file, or its header and
        first rows (exactly as in the file)."""
        limit = self.first_rows.get(dataset.name)
        if limit is None or limit >= len(dataset.rows):
            return dataset.text
        return dataset.prefix_text(1 + limit)

    def unread_text(self, dataset: Dataset) -> str | None:
        """The rows of a planted file that the model never reads (the header, then the rows
        after the first ``first_rows``, exactly as in the file): the same file's control for
        how much the read rows were learned. None when the whole file is read."""
        limit = self.first_rows.get(dataset.name)
        records = dataset.records
        if limit is None or limit + 1 >= len(records):
            return None
        return dataset.newline.join([records[0], *records[1 + limit :]]) + dataset.newline


def load_lab_config(setting: str, overrides: Sequence[str] = ()) -> Any:
    """``conf/lab/<setting>.yaml`` (or a YAML file's path) with dotted ``key=value`` overrides."""
    path = Path(setting)
    if not path.is_file():
        path = conf_dir() / "lab" / f"{setting}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (conf_dir() / "lab").glob("*.yaml")))
        raise ConfigError(f"No lab setting '{setting}'; choose one of: {known}.")
    cfg = OmegaConf.load(path)
    return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))


def make_plan(cfg: Mapping[str, Any]) -> LabPlan:
    """Choose the planted datasets (seeded) and deal them repetition counts in turn; the
    parts of a ``slices`` section join the pool (and may be planted)."""
    slices = load_slices(cfg.get("slices"))
    parts = slices.names if slices else []
    pool = [*(str(d) for d in cfg.get("pool") or []), *parts]
    named = [str(d) for d in cfg.get("plantable") or []]
    plantable = [*named, *parts] if named else pool
    unknown = [d for d in plantable if d not in pool]
    if unknown:
        raise ConfigError(f"Lab datasets {unknown} are plantable but not in the lab's pool.")
    n_planted = int(cfg["n_planted"])
    if not 0 < n_planted <= len(plantable) or n_planted >= len(pool):
        raise ConfigError(
            f"The lab plants {n_planted} of {len(plantable)} plantable datasets and needs at "
            "least one held-out dataset left in its pool."
        )
    levels = [int(r) for r in cfg["repetitions"]]
    if not levels or min(levels) < 1:
        raise ConfigError("The lab's repetitions must be a non-empty list of counts >= 1.")
    rng = random.Random(int(cfg["seed"]))
    chosen = rng.sample(plantable, n_planted)
    planted = {d: levels[i % len(levels)] for i, d in enumerate(chosen)}
    first_rows = {str(d): int(n) for d, n in (cfg.get("first_rows") or {}).items()}
    outside = sorted(set(first_rows) - set(plantable))
    if outside or any(n < 1 for n in first_rows.values()):
        raise ConfigError(
            f"The lab's first_rows must map plantable datasets to a count >= 1 (got {first_rows})."
        )
    return LabPlan(
        name=str(cfg["name"]),
        planted=planted,
        held_out=[d for d in pool if d not in planted],
        checkpoints=sorted({int(c) for c in cfg["checkpoints"]}),
        first_rows={d: n for d, n in first_rows.items() if d in planted},
        stream=load_stream(cfg.get("stream"), [*pool, *([slices.source] if slices else [])]),
        slices=slices,
    )
