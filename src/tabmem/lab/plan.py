"""The lab's plan: which datasets are planted how often, and what the model reads in each pass.

The choice is seeded: the same lab config gives the same planted datasets, the same
repetition counts and the same training order. In pass ``p`` (1-based) every planted dataset
whose repetition count is at least ``p`` is read once, in a seeded order; so after pass ``p`` a
dataset planted ``r`` times has been read ``min(p, r)`` times, and a checkpoint saved after
pass ``p`` is a model that has seen each planted file exactly that often.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tabmem.errors import ConfigError
from tabmem.paths import conf_dir


@dataclass(frozen=True)
class LabPlan:
    """Planted datasets with their repetition counts, held-out datasets, checkpoints."""

    name: str
    planted: dict[str, int]
    held_out: list[str]
    checkpoints: list[int]

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
    """Choose the planted datasets (seeded) and deal them repetition counts in turn."""
    pool = [str(d) for d in cfg["pool"]]
    plantable = [str(d) for d in cfg.get("plantable") or pool]
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
    return LabPlan(
        name=str(cfg["name"]),
        planted=planted,
        held_out=[d for d in pool if d not in planted],
        checkpoints=sorted({int(c) for c in cfg["checkpoints"]}),
    )
