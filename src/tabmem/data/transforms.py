"""Dataset transforms (``transform=``): the same data in another form, seeded and deterministic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tabmem.data.dataset import Dataset
from tabmem.errors import ConfigError


def apply_transform(dataset: Dataset, transform: Mapping[str, Any], seed: int) -> Dataset:
    """The dataset as the transform config describes it; ``original`` leaves it unchanged."""
    name = str(transform.get("name", "original"))
    if name == "original":
        return dataset
    raise ConfigError(f"Unknown transform '{name}'; the transforms tabmem knows: original.")
