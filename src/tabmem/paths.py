"""Where the project's config, data and outputs live."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The repository root: ``$TABMEM_ROOT`` if set, else the folder above ``src/``."""
    env = os.environ.get("TABMEM_ROOT")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2]


def conf_dir() -> Path:
    return project_root() / "conf"


def data_dir() -> Path:
    return project_root() / "data"
