"""One grid cell's identity: its name parts, its flattened parameters and its config hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SECRET_NAMES = {"api_key", "secret", "password", "token", "access_token", "authorization"}
CELL_GROUPS = ("model", "dataset", "test", "transform")


@dataclass(frozen=True)
class Cell:
    """model × dataset × test × transform, the unit of the grid and of MLflow runs."""

    model: str
    dataset: str
    test: str
    transform: str

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Cell:
        return cls(*(str(cfg[group]["name"]) for group in CELL_GROUPS))

    @property
    def run_name(self) -> str:
        return f"{self.model} | {self.dataset} | {self.test} | {self.transform}"

    def tags(self) -> dict[str, str]:
        return {
            "model": self.model,
            "dataset": self.dataset,
            "test": self.test,
            "transform": self.transform,
        }


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested config as ``a.b.c`` keys, with secret-looking keys left out."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if str(key).lower() in SECRET_NAMES:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def cell_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that define a cell's result: its four groups and the seed."""
    tree = {group: cfg[group] for group in CELL_GROUPS}
    tree["seed"] = cfg["seed"]
    return flatten(tree)


def group_hash(params: Mapping[str, Any]) -> str:
    """The hash of a cell's parameters without its test's: the tests of one model on one file
    (same transform and seed) share it, and a dataset verdict joins them by it."""
    return config_hash({k: v for k, v in params.items() if not k.startswith("test.")})


def config_hash(params: Mapping[str, Any]) -> str:
    """A stable hash of a cell's parameters; equal hashes mean the same experiment."""
    blob = json.dumps(dict(params), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
