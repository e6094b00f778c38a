"""The backends tabmem knows, in one table: a model config's ``backend:`` names a row.

Each row gives the class (imported only when a model uses it, so a backend's heavy packages
load only for its models), the package extra that installs what it needs, and whether its
answers cost money (priced from litellm's cost map). Each class builds itself from its model
config with ``from_config(cfg, ctx)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabmem.errors import ConfigError, ProviderError
from tabmem.llm.weights import assembled_file, package_file


@dataclass(frozen=True)
class BackendKind:
    """Where a backend's class lives (``module:Class``), the extra it needs, if it is paid."""

    target: str
    extra: str = ""
    paid: bool = False
    credentials: bool = False  # reads a key or a server URL from the environment


BACKENDS: dict[str, BackendKind] = {
    "llama_cpp": BackendKind("tabmem.llm.llama_cpp_backend:LlamaCppBackend", "local"),
    "litellm": BackendKind(
        "tabmem.llm.litellm_backend:LiteLLMBackend", paid=True, credentials=True
    ),
    "oracle": BackendKind("tabmem.llm.oracle.backend:OracleBackend"),
    "baseline": BackendKind("tabmem.llm.baselines:BaselineBackend"),
    "transformers": BackendKind("tabmem.llm.transformers_backend:TransformersBackend", "hf"),
    "vllm": BackendKind("tabmem.llm.vllm_backend:VLLMBackend", "gpu"),
    "python": BackendKind("tabmem.llm.python_backend:PythonBackend"),
}


@dataclass(frozen=True)
class BuildContext:
    """What building a backend may need beside its config: where weights are assembled,
    whether API credentials must be present (not in a dry run), and the CPU threads a local
    model gets when its config leaves ``n_threads`` null."""

    weights_dir: Path
    require_credentials: bool = True
    threads: int | None = None

    def cpu_threads(self, cfg: Mapping[str, Any]) -> int | None:
        """The CPU threads a local model runs on: its config's ``n_threads``, else the share
        of the cores its cell was given."""
        return cfg.get("n_threads") or self.threads

    def weights(self, cfg: Mapping[str, Any]) -> Path:
        """The weights file a config names: a path, a package's file, or parts to assemble."""
        weights = cfg.get("weights") or {}
        hint = weights.get("install_hint", "run make demo, which installs it")
        if weights.get("path"):
            return Path(weights["path"]).expanduser()
        if weights.get("assemble"):
            return assembled_file(weights["assemble"], self.weights_dir / weights["file"], hint)
        if weights.get("package"):
            return package_file(weights["package"], weights["file"], hint)
        raise ConfigError(
            f"Model '{cfg['name']}' has no weights: set weights.path or weights.package."
        )


def credentials_problems(cfg: Mapping[str, Any]) -> list[str]:
    """What a model config needs from the environment (an API key, a server's URL) and does
    not find there, one sentence each; empty for backends that need nothing of it."""
    row = BACKENDS.get(str(cfg.get("backend")))
    if row is None or not row.credentials:
        return []
    return backend_class(str(cfg.get("backend")), str(cfg.get("name"))).credentials_problems(cfg)


def backend_class(kind: str, model: str) -> Any:
    """The class of backend ``kind``; an error names the extra to install when it is missing."""
    row = BACKENDS.get(kind)
    if row is None:
        raise ConfigError(
            f"Model '{model}' has backend '{kind}', which tabmem does not know; "
            f"use {', '.join(BACKENDS)}."
        )
    module, _, name = row.target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise ProviderError(
            f"Model '{model}' needs the {kind} backend's packages ({exc.name} is missing); "
            f"install them with: pip install -e '.[{row.extra}]'."
        ) from exc


def is_paid(kind: str) -> bool:
    """Whether a backend's answers cost money (else they run here, free)."""
    row = BACKENDS.get(kind)
    return row is not None and row.paid
