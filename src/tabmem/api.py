"""The Python API: ``tabmem.run`` and ``tabmem.grid``, the CLI's cells from a notebook.

Both compose the configuration with Hydra's compose API from the repository's ``conf/`` (the
same defaults, groups and override syntax as ``python run.py``), run each cell through
``tabmem.runner.run_cell`` and read the result back from the same MLflow store, so a cell run
here and the same cell run from the CLI are one experiment (same config hash, same metrics).
A dataset may also be a CSV path or a DataFrame, and a model a Python callable or object
(docs/python-api.md).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabmem.errors import ConfigError, DatasetError
from tabmem.results import RESULT_COLUMNS, SPEND, CellResult
from tabmem.suites import is_suite

if TYPE_CHECKING:
    import pandas as pd
    from omegaconf import DictConfig

    from tabmem.report.dataset_verdicts import DatasetOutcome
    from tabmem.tracking.store import TrackingStore


def run(
    model: Any = None,
    dataset: Any = None,
    test: str | None = None,
    transform: str | None = "original",
    *,
    name: str | None = None,
    model_name: str | None = None,
    force: bool = False,
    quiet: bool = False,
    **overrides: Any,
) -> CellResult | list[CellResult]:
    """Run one cell as ``python run.py model=… dataset=… test=… transform=…`` would.

    ``model``: a config name (``conf/model/``), or a callable / object with ``complete`` and/or
    ``chat`` (named by ``model_name``). ``dataset``: a config name, a CSV path, or a DataFrame
    (named by ``name``). ``overrides`` are the CLI's overrides as keywords, ``__`` or ``.`` for
    the dots: ``test__n_queries=5`` or ``**{"test.n_queries": 5}``, ``outputs_dir="out"``.
    A finished cell is read back, not run again, unless ``force=True``. Returns a
    ``CellResult``, or one per member test when ``test`` names a suite, followed by the
    suite's dataset verdict (``scope == "dataset"``) where it has tests of rows seen.
    """
    cfg, outcomes = _run_outcomes(
        model, dataset, test, transform, name, model_name, force, quiet, overrides
    )
    if not is_suite(cfg.test):
        return _results(cfg, outcomes, datasets=False)[0]
    return _results(cfg, outcomes)


def _run_outcomes(
    model: Any,
    dataset: Any,
    test: str | None,
    transform: str | None,
    name: str | None,
    model_name: str | None,
    force: bool,
    quiet: bool,
    overrides: Mapping[str, Any],
) -> tuple[DictConfig, list[CellResult]]:
    """Compose one cell's config and run it; its config and its tests' outcomes."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from omegaconf import OmegaConf
    from rich.console import Console

    from tabmem.runner import run_cell

    given = [f"{key.replace('__', '.')}={override_value(v)}" for key, v in overrides.items()]
    given.append(f"force={override_value(force)}")
    groups = [f"{g}={v}" for g, v in (("test", test), ("transform", transform)) if v is not None]
    outputs = outputs_path(compose_config([o for o in given if o.startswith("outputs_dir=")]))
    choices = [
        *model_overrides(model, model_name),
        *dataset_overrides(dataset, name, outputs, quiet),
        *groups,
    ]
    cfg = compose_config([*choices, *given])
    job_dir = outputs / "runs" / datetime.now().strftime("%Y-%m-%d/%H-%M-%S-%f")
    return cfg, run_cell(cfg, OmegaConf.to_yaml(cfg), job_dir, Console(quiet=quiet))


def _results(
    cfg: DictConfig, outcomes: Sequence[CellResult], datasets: bool = True
) -> list[CellResult]:
    """The outcomes read back from MLflow, then (``datasets``) their dataset verdicts, each
    logged once."""
    from tabmem.intake import store_of
    from tabmem.report.dataset_verdicts import dataset_outcomes, rule_of

    store = store_of(cfg)
    results = [read_back(outcome, store) for outcome in outcomes]
    for found in dataset_outcomes(outcomes, rule_of(cfg), store) if datasets else []:
        results.append(dataset_result(found, store.uri))
    return results


def read_back(outcome: CellResult, store: TrackingStore) -> CellResult:
    """A cell's record as its MLflow run holds it (a cell skipped without a run keeps its
    reason): the store is the truth a notebook reads."""
    if not outcome.run_id:
        return replace(outcome, verdict=outcome.status)
    run = store.client.get_run(outcome.run_id)
    kept = {k: getattr(outcome, k) for k in ("model", "dataset", "test", "transform", "message")}
    spend = {k: getattr(outcome, k) for k in SPEND}
    return CellResult.from_run(
        outcome.run_id,
        run.data.tags,
        run.data.metrics,
        outcome.status,
        **kept,
        **spend,
        seed=outcome.seed,
        group=outcome.group,
        tracking_uri=store.uri,
    )


def dataset_result(found: DatasetOutcome, tracking_uri: str) -> CellResult:
    """A dataset verdict (``tabmem.report.dataset_verdicts``) as a result row: test
    ``dataset``, scope ``dataset``, the combined p-value, the tests it combined and its grid
    q-value (metric ``q_value``)."""
    verdict = found.verdict
    tests = verdict.combined
    q = {} if found.q_value is None else {"q_value": found.q_value}
    return CellResult(
        **found.cell.tags(),
        status=found.status,
        verdict=verdict.verdict.value,
        reason=verdict.reason,
        n_queries=len(tests),
        n_hits=len(verdict.carried_by),
        p_value=verdict.p_value,
        metrics={**{f"p_value.{t.test}": float(t.p_value) for t in tests}, **q},
        run_id=found.run_id,
        tracking_uri=tracking_uri,
        scope="dataset",
    )


def grid(
    models: Sequence[Any] | Mapping[str, Any],
    datasets: Sequence[Any] | Mapping[str, Any],
    tests: Sequence[str],
    transforms: Sequence[str] = ("original",),
    *,
    force: bool = False,
    quiet: bool = False,
    **overrides: Any,
) -> pd.DataFrame:
    """Every cell of models × datasets × tests × transforms, one row per test run.

    The cells run one after another in this process (a Python model lives only here), each as
    ``run`` runs it. A mapping gives names: ``{"mine": my_callable}``, ``{"people": frame}``.
    After the tests' rows come the dataset verdicts (``scope == "dataset"``, test ``dataset``):
    each model × dataset × transform's tests of rows seen in this grid, combined.
    """
    import pandas as pd

    outcomes: list[CellResult] = []
    cfg = None
    for model_name, model in _named(models, "model"):
        for name, dataset in _named(datasets, "dataset"):
            for test in tests:
                for transform in transforms:
                    cfg, ran = _run_outcomes(
                        model,
                        dataset,
                        test,
                        transform,
                        name,
                        model_name,
                        force,
                        quiet,
                        overrides,
                    )
                    outcomes += ran
    if cfg is None:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    frames = [result.to_frame() for result in _results(cfg, outcomes)]
    return pd.concat(frames, ignore_index=True)


def config_dir() -> Path:
    """The config folder the API composes from: the installed package's, or a checkout's
    ``conf/`` (see ``tabmem.paths``)."""
    from tabmem.paths import conf_dir

    found = conf_dir()
    if not (found / "config.yaml").is_file():
        raise ConfigError(
            f"tabmem's configs are not at {found}: reinstall tabmem (pip install . in "
            "its repository, or its wheel)."
        )
    return found


def compose_config(overrides: Sequence[str]) -> DictConfig:
    """The job config ``python run.py <overrides>`` would get (without the ``hydra`` node)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(config_dir()), job_name="tabmem", version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def outputs_path(cfg: Any) -> Path:
    return Path(str(cfg.outputs_dir)).expanduser().resolve()


def override_value(value: Any) -> str:
    """A Python value in Hydra's override syntax (strings quoted, so ``"1"`` stays a string)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | os.PathLike):
        text = re.sub(r"(\\+)('|$)", lambda m: m.group(1) * 2 + m.group(2), str(value))
        return "'" + text.replace("'", "\\'") + "'"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{override_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Iterable):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    raise ConfigError(f"Cannot pass a {type(value).__name__} as a config value.")


def safe_name(text: str) -> str:
    """A name fit for run names and file names: word characters, dots and dashes."""
    return re.sub(r"[^\w.-]+", "-", text).strip("-") or "unnamed"


def model_overrides(model: Any, model_name: str | None) -> list[str]:
    """``model=<config>``, or ``model=python`` with the registered object's identity."""
    if model is None or isinstance(model, str):
        if model_name:
            raise ConfigError("model_name= names a Python model; a config keeps its own name.")
        return [f"model={model}"] if model else []
    from tabmem.llm.python_backend import prompt_form_of, register

    given = model_name or getattr(model, "__name__", None) or type(model).__name__
    if "<" in given:
        raise ConfigError("Give a lambda a name with model_name=...: the name is its identity.")
    callable_name = register(model, safe_name(given))
    return [
        "model=python",
        f"model.name={override_value(safe_name(given))}",
        f"model.callable={override_value(callable_name)}",
        f"model.prompt_form={prompt_form_of(model)}",
    ]


_told_missing: set[str] = set()
"""The frames (by the sha256 of their text) whose missing values were already said."""


def dataset_overrides(
    dataset: Any, name: str | None, outputs: Path, quiet: bool = False
) -> list[str]:
    """``dataset=<config>``, or ``dataset=csv`` with the file's path, name and sha256.

    A DataFrame is first written as canonical CSV text under ``<outputs>/datasets/``; where it
    has missing values, which become empty fields, one sentence says so (once per frame and
    process, unless ``quiet``).
    """
    import pandas as pd

    from tabmem.data.frames import missing_note, text_sha256, write_frame
    from tabmem.data.registry import read_canonical_text

    if isinstance(dataset, pd.DataFrame):
        if not name:
            raise ConfigError("A DataFrame needs a name: tabmem.run(dataset=frame, name=...).")
        path, digest = write_frame(dataset, safe_name(name), outputs / "datasets")
        note = missing_note(dataset, safe_name(name))
        if note and digest not in _told_missing:
            _told_missing.add(digest)
            if not quiet:
                print(note, file=sys.stderr)
        return _file_overrides(safe_name(name), path, digest)
    if dataset is None or (
        isinstance(dataset, str) and (config_dir() / "dataset" / f"{dataset}.yaml").is_file()
    ):
        if name:
            raise ConfigError("name= names a CSV file or a DataFrame; a config keeps its own.")
        return [f"dataset={dataset}"] if dataset else []
    path = Path(dataset).expanduser()
    if not path.is_file():
        raise DatasetError(
            f"Dataset '{dataset}' is neither a config in {config_dir() / 'dataset'} nor a file."
        )
    label = safe_name(name or path.stem)
    return _file_overrides(label, path.resolve(), text_sha256(read_canonical_text(path, label)))


def _file_overrides(name: str, path: Path, digest: str) -> list[str]:
    return [
        "dataset=csv",
        f"dataset.name={override_value(name)}",
        f"dataset.path={override_value(str(path))}",
        f"dataset.sha256={override_value(digest)}",
    ]


def _named(items: Sequence[Any] | Mapping[str, Any], group: str) -> list[tuple[str | None, Any]]:
    """(name, item) pairs: a mapping's keys name Python models, files and frames (a config keeps
    its own name); a list names none."""
    if not isinstance(items, Mapping):
        return [(None, item) for item in items]
    folder = config_dir() / group
    return [
        (None if isinstance(v, str) and (folder / f"{v}.yaml").is_file() else k, v)
        for k, v in items.items()
    ]
