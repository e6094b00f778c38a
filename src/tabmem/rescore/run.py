"""Rescore one transcript file and log the result as an MLflow run, like a live cell."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import rescorable_test
from tabmem.errors import ConfigError
from tabmem.rescore.core import Located, rescore
from tabmem.rescore.layouts import guess_format, read_transcript
from tabmem.results import CellResult, TestResult
from tabmem.suites import is_suite


@dataclass
class Rescored:
    """What a rescoring produced: the result, how many lines were located, and the record of
    its run (logged now, or read back from the run that rescored the same file before)."""

    result: TestResult
    located: Located
    record: CellResult

    @property
    def run_id(self) -> str:
        """The MLflow run that holds the rescored cell."""
        return self.record.run_id


def run_rescore(
    path: Path,
    dataset: str,
    test_name: str,
    model_name: str,
    *,
    layout: str | None = None,
    transform: str = "original",
    seed: int = 0,
    experiment: str = "rescore",
    outputs_dir: Path = Path("outputs"),
    settings: Sequence[str] = (),
    ignore: Sequence[str] = (),
    data_path: Path | None = None,
    dataset_name: str | None = None,
    force: bool = False,
    quiet: bool = False,
) -> Rescored:
    """Rescore a transcript file and log it as an MLflow run of ``experiment`` (a file already
    rescored with the same settings is read back unless ``force``). ``ignore`` names columns of
    a feature table left out as parsing artefacts; ``data_path`` is the file of a dataset that
    users provide (FICO, Spaceship Titanic); ``dataset_name`` names a CSV path given as
    ``dataset`` (default: the file's stem)."""
    from omegaconf import OmegaConf
    from rich.console import Console

    from tabmem.api import compose_config, dataset_overrides, outputs_path, override_value
    from tabmem.cell import Cell, config_hash, flatten
    from tabmem.data import load_dataset
    from tabmem.data.transforms import apply_transform
    from tabmem.data.twin import twin_info
    from tabmem.intake import recording, store_of
    from tabmem.runner import Recorder
    from tabmem.tracking.inputs import dataset_input
    from tabmem.tracking.traces import QueryLog

    test = rescorable_test(test_name)
    layout = layout or guess_format(path, test_name)
    lines = read_transcript(path, layout, ignore)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    overrides = [f"outputs_dir={outputs_dir}", f"experiment={experiment}", f"seed={seed}"]
    outputs = outputs_path(compose_config(overrides))
    overrides += [
        *dataset_overrides(dataset, dataset_name, outputs),
        *([f"dataset.path={override_value(str(data_path.resolve()))}"] if data_path else []),
        f"test={test_name}",
        f"transform={transform}",
        "progress=false",
        f"force={'true' if force else 'false'}",
    ]
    cfg = compose_config(overrides)
    if is_suite(cfg.test):
        raise ConfigError(f"Rescoring takes one test; '{test_name}' is a suite.")
    implied = test.settings_for(lines)
    given = dict(setting(s) for s in settings)
    params = {**OmegaConf.to_container(cfg.test, resolve=True), **implied, **given}
    data = apply_transform(load_dataset(cfg.dataset), cfg.transform, seed)
    ctx = TestContext(dataset=data, model=None, params=params, seed=seed)
    started = datetime.now()
    result, located = rescore(test, ctx, lines)
    result.info.update(twin_info(data))
    result.info["transcript_layout"] = layout
    if ignore:
        result.info["columns_ignored"] = ", ".join(ignore)
    cell = Cell(model_name, data.name, test_name, str(cfg.transform.name))
    tree = {
        "model": {"name": model_name, "source": "transcript"},
        "dataset": OmegaConf.to_container(cfg.dataset, resolve=True),
        "test": params,
        "transform": OmegaConf.to_container(cfg.transform, resolve=True),
        "seed": seed,
        "transcript_sha256": digest,
        "transcript_ignored_columns": list(ignore),
    }
    cell_params = flatten(tree)
    store = store_of(cfg)
    console = Console(quiet=quiet)
    record = None if cfg.force else store.finished(config_hash(cell_params))
    if record is None:
        window = (int(started.timestamp() * 1e9), int(datetime.now().timestamp() * 1e9))
        recorder = Recorder(
            store,
            "",
            outputs / "rescore" / started.strftime("%Y-%m-%d/%H-%M-%S-%f"),
            OmegaConf.to_yaml(OmegaConf.create({**tree, "transcript": str(path)})),
            console,
            **recording(cfg),
        )
        record = recorder.finished(
            cell,
            cell_params,
            result,
            {},
            QueryLog(result.records, cell.tags(), window),
            extra_tags={"source": "transcript", "transcript_sha256": digest},
            data_input=dataset_input(data),
        )
    else:
        console.print(f"[dim]skip[/] {cell.run_name}: already rescored as run {record.run_id}")
    return Rescored(result, located, record)


def recorded_config(file: Path) -> dict[str, Any]:
    """What the ``config.yaml`` beside a run's ``queries.json`` (both artifacts of one MLflow
    run) says its cell was: dataset (a user's file by its path, and the name the run gave it),
    test, model, transform, seed, and the whole config (``config``); {} without one. A suite's
    config names no single test."""
    import yaml

    from tabmem.data import dataset_specs

    path = file.with_name("config.yaml")
    cfg = yaml.safe_load(path.read_text()) if path.is_file() else None
    if not isinstance(cfg, dict):
        return {}
    dataset, test = cfg.get("dataset") or {}, cfg.get("test") or {}
    name, data_path = dataset.get("name"), dataset.get("path")
    users_file = bool(data_path) and name not in dataset_specs()
    return {
        "--dataset": data_path if users_file else name,
        "data_path": data_path,
        "dataset_name": name if users_file else None,
        "--test": None if is_suite(test) else test.get("name"),
        "--model-name": (cfg.get("model") or {}).get("name"),
        "transform": (cfg.get("transform") or {}).get("name"),
        "seed": cfg.get("seed"),
        "config": cfg,
    }


def recorded_settings(beside: dict[str, Any], test: str) -> list[str]:
    """The settings ``test`` ran with, as ``--set`` takes them, from the run's config that
    ``recorded_config`` read (a suite's section for its member ``test``); a null is left out
    (chosen at run time from the answers, as feature completion's feature)."""
    import json

    from omegaconf import OmegaConf

    from tabmem.suites import member_config

    recorded = (beside.get("config") or {}).get("test") or {}
    if is_suite(recorded):
        section = member_config(recorded, test)
    else:
        section = recorded if recorded.get("name") == test else None
    if not section:
        return []
    values = OmegaConf.to_container(OmegaConf.create(section), resolve=True)
    return [f"{k}={json.dumps(v)}" for k, v in values.items() if v is not None]  # type: ignore[union-attr]


def setting(text: str) -> tuple[str, Any]:
    """``key=value`` with the value read as YAML (numbers, lists, null)."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set takes KEY=VALUE, not '{text}'.")
    return key.removeprefix("test."), yaml.safe_load(value)
