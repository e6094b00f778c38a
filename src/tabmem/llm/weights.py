"""Locate local model weights that ship inside installed packages, without network access."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from pathlib import Path

from tabmem.errors import ProviderError


def package_file(package: str, filename: str, install_hint: str) -> Path:
    """A file inside an installed package, found without importing the package.

    Importing is avoided on purpose: some weight packages import optional plugins.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(f"The weights package '{package}' is not installed; {install_hint}.")
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.is_file():
        raise ProviderError(f"The package '{package}' has no file {filename}; {install_hint}.")
    return path


def assembled_file(package: str, target: Path, install_hint: str) -> Path:
    """Weights split into chunk packages, joined once by the package's ``assemble()``."""
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise ProviderError(
            f"The weights package '{package}' is not installed; {install_hint}."
        ) from exc
    return Path(module.assemble(target))


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
