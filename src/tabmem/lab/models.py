"""Lab checkpoints as model configs (``model=lab-<setting>-p<passes>``) that run.py can load.

The configs live in ``<outputs>/lab/<setting>/conf/model/``; a run finds them with
``hydra.searchpath=[file://<outputs>/lab/<setting>/conf]``. Each config records what its
model has read (``lab.seen``: dataset -> times; ``lab.first_rows``: the files of which only the
header and first rows were read), so every tracked cell carries its ground truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tabmem.errors import ConfigError
from tabmem.lab.plan import LabPlan
from tabmem.llm.weights import assembled_file, package_file
from tabmem.paths import conf_dir


def base_model_config(name: str) -> dict[str, Any]:
    """The lab's base model config from ``conf/model/``; it must be a transformers model."""
    path = conf_dir() / "model" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"The lab's base_model '{name}' has no config in conf/model/.")
    cfg = yaml.safe_load(path.read_text())
    if cfg.get("backend") != "transformers":
        raise ConfigError(
            f"The lab fine-tunes with transformers; base_model '{name}' has backend "
            f"'{cfg.get('backend')}' (use smollm2-135m-hf or another transformers model)."
        )
    return cfg


def base_weights(cfg: Mapping[str, Any], weights_dir: Path) -> Path:
    """Where the base model's weights are: a folder or a GGUF file."""
    weights = cfg.get("weights") or {}
    hint = str(weights.get("install_hint", "install the model's weights package"))
    if weights.get("path"):
        return Path(str(weights["path"])).expanduser()
    if weights.get("assemble"):
        return assembled_file(str(weights["assemble"]), weights_dir / weights["file"], hint)
    if weights.get("package"):
        return package_file(str(weights["package"]), str(weights["file"]), hint)
    raise ConfigError(f"The lab's base model '{cfg['name']}' has no weights in its config.")


def checkpoint_name(setting: str, passes: int) -> str:
    return f"lab-{setting}-p{passes}"


def write_model_configs(
    plan: LabPlan,
    checkpoints: Mapping[int, Path],
    evaluation: Mapping[str, Any],
    conf_root: Path,
    fingerprint: str,
) -> list[str]:
    """One model config per checkpoint; returns their names in pass order."""
    folder = conf_root / "model"
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for passes, weights in sorted(checkpoints.items()):
        name = checkpoint_name(plan.name, passes)
        batch = int(evaluation.get("batch_size", 4))
        cfg = {
            "name": name,
            "backend": "transformers",
            "weights": {"path": str(weights.resolve())},
            "device": "auto",
            "dtype": "float32",
            "batch_size": batch,
            "prompt_form": str(evaluation.get("prompt_form", "completion")),
            "context_window": int(evaluation.get("context_window", 4096)),
            "max_concurrency": batch,
            "lab": {
                "setting": plan.name,
                "fingerprint": fingerprint,
                "passes": passes,
                "planted": dict(plan.planted),
                "seen": {d: plan.seen(d, passes) for d in plan.planted},
                "first_rows": dict(plan.first_rows),
                "held_out": list(plan.held_out),
            },
        }
        header = f"# Contamination lab '{plan.name}': the model after {passes} passes.\n"
        (folder / f"{name}.yaml").write_text(header + yaml.safe_dump(cfg, sort_keys=False))
        names.append(name)
    return names
