"""Where the shipped configs and datasets live.

A built wheel carries them inside the package (``tabmem/conf``, ``tabmem/datasets``: the build
copies the repository's top-level ``conf/`` and ``data/`` there, see ``setup.py``); a checkout
(an editable install, or ``src`` on the path) reads the top-level folders themselves.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

# Folder inside the installed package -> folder at the top of a checkout.
SHIPPED = {"conf": "conf", "datasets": "data"}


def _shipped(inside: str) -> Path:
    """The package's ``inside`` folder where it was installed, else the checkout's folder."""
    packaged = Path(str(files("tabmem").joinpath(inside)))
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / SHIPPED[inside]


def conf_dir() -> Path:
    """The Hydra config folder (``config.yaml`` and the groups ``model/``, ``dataset/`` …)."""
    return _shipped("conf")


def data_dir() -> Path:
    """The shipped datasets' folder (CSV files, ``provenance.json``, ``PROVENANCE.md``)."""
    return _shipped("datasets")
