"""Rescore a whole folder of published answers: each file's model, dataset and tests read from
its path through a small mapping (``conf/rescore/published.yaml``), one MLflow run per file
and test, and one outcome per file and test, refused ones included, for the summary."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tabmem.errors import ConfigError, TabmemError
from tabmem.rescore.run import run_rescore
from tabmem.results import CellResult

if TYPE_CHECKING:
    from tabmem.report.dataset_verdicts import DatasetOutcome

RESCORED, REFUSED, NEEDS_DATA = "rescored", "refused", "needs data"


@dataclass(frozen=True)
class Kind:
    """A sub-folder's files: the tests that score them, their layout (None: guessed), and the
    settings their names carry as ``<setting>-<value>``."""

    tests: tuple[str, ...]
    format: str | None = None
    name_settings: tuple[str, ...] = ()


@dataclass(frozen=True)
class FolderMap:
    """What the mapping file says: model folders, dataset names, kinds, artefact columns."""

    models: dict[str, str]
    datasets: dict[str, str]
    kinds: dict[str, Kind]
    ignore_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> FolderMap:
        """The mapping in ``path`` (YAML); a missing or malformed file is a one-sentence error."""
        import yaml

        if not path.is_file():
            raise ConfigError(f"The folder mapping {path} does not exist.")
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
            kinds = {
                name: Kind(tuple(k["tests"]), k.get("format"), tuple(k.get("name_settings") or ()))
                for name, k in raw["kinds"].items()
            }
            return cls(
                dict(raw.get("models") or {}),
                dict(raw["datasets"]),
                kinds,
                {f: tuple(c) for f, c in (raw.get("ignore_columns") or {}).items()},
            )
        except (yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(
                f"{path} is not a folder mapping (models, datasets, kinds): {exc}"
            ) from exc

    def dataset_of(self, stem: str) -> str | None:
        """The dataset config of the longest mapped name that begins ``stem`` (then "-" or
        the end), or None."""
        found = [n for n in self.datasets if stem == n or stem.startswith(f"{n}-")]
        return self.datasets[max(found, key=len)] if found else None


def rescoring_status(outcome: CellResult) -> str:
    """How the summary names a file × test's status: rescored, refused (the outcome's
    ``message`` says why) or waiting on a file the user provides."""
    return {"finished": RESCORED, "skipped": NEEDS_DATA}.get(outcome.status, REFUSED)


def located_text(outcome: CellResult) -> str:
    """The lines of a rescored file whose query was found in the dataset, of all its lines."""
    lines = int(outcome.metrics.get("transcript_lines", 0))
    return f"{lines - int(outcome.metrics.get('queries_not_located', 0))}/{lines}"


@dataclass(frozen=True)
class Planned:
    """A file and one test to score it with, and how."""

    path: Path
    file: str
    model: str
    dataset: str
    test: str
    layout: str | None
    settings: tuple[str, ...]
    ignore: tuple[str, ...]


def default_mapping() -> Path:
    """``conf/rescore/published.yaml`` of the configs in use."""
    from tabmem.api import config_dir

    return config_dir() / "rescore" / "published.yaml"


def results_root(folder: Path) -> Path:
    """The folder of model folders: ``folder`` itself, or its ``results/`` when it has one."""
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder.")
    inner = folder / "results"
    return inner if inner.is_dir() else folder


def plan_folder(folder: Path, mapping: FolderMap) -> tuple[list[Planned], list[CellResult]]:
    """Every file under ``<model>/<kind>/`` as the tests to score it with, and a refused
    outcome for each file whose kind or dataset the mapping does not know."""
    root = results_root(folder)
    planned, refused = [], []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        file = path.relative_to(root).as_posix()
        parts = path.relative_to(root).parts
        model = mapping.models.get(parts[0], parts[0]) if len(parts) == 3 else ""
        dataset = mapping.dataset_of(path.stem) or ""
        kind = mapping.kinds.get(parts[1]) if len(parts) == 3 else None
        reason = ""
        if len(parts) != 3:
            reason = "not at <model>/<kind>/<file>"
        elif kind is None:
            reason = f"the mapping names no tests for the kind '{parts[1]}'"
        elif path.suffix.lower() != ".csv":
            reason = "not a CSV file"
        elif not dataset:
            reason = f"the mapping names no dataset for the file name '{path.stem}'"
        if reason or kind is None:
            refused.append(_outcome(file, model, dataset, "", "failed", reason))
            continue
        settings = tuple(_name_settings(path.stem, kind.name_settings))
        ignore = mapping.ignore_columns.get(file, ())
        planned += [
            Planned(path, file, model, dataset, test, kind.format, settings, ignore)
            for test in kind.tests
        ]
    return planned, refused


def _name_settings(stem: str, names: Sequence[str]) -> list[str]:
    """``name=value`` for each setting the file name carries as ``<name>-<number>``."""
    found = []
    for name in names:
        match = re.search(rf"(?:^|-){re.escape(name)}-([0-9]+(?:\.[0-9]+)?)(?:-|$)", stem)
        if match:
            found.append(f"{name}={match[1]}")
    return found


def rescore_folder(
    folder: Path,
    *,
    mapping_path: Path | None = None,
    data_paths: Mapping[str, Path] | None = None,
    experiment: str = "rescore",
    outputs_dir: Path = Path("outputs"),
    seed: int = 0,
    force: bool = False,
    quiet: bool = True,
) -> list[CellResult]:
    """Rescore every file of ``folder`` with the tests its kind names (one MLflow run each);
    a file that cannot be rescored is kept with its reason. ``data_paths`` gives the files of
    datasets that users provide."""
    from tabmem.data import dataset_specs

    mapping = FolderMap.load(mapping_path or default_mapping())
    planned, outcomes = plan_folder(folder, mapping)
    specs = dataset_specs()
    paths = dict(data_paths or {})
    for item in planned:
        spec = specs.get(item.dataset)
        if spec is not None and spec.user_provided and item.dataset not in paths:
            reason = f"{item.dataset} is a dataset users provide: pass --data {item.dataset}=PATH"
            outcomes.append(_planned_outcome(item, "skipped", reason))
            continue
        try:
            done = run_rescore(
                item.path,
                item.dataset,
                item.test,
                item.model,
                layout=item.layout,
                seed=seed,
                experiment=experiment,
                outputs_dir=outputs_dir,
                settings=item.settings,
                ignore=item.ignore,
                data_path=paths.get(item.dataset),
                force=force,
                quiet=quiet,
            )
        except TabmemError as exc:
            outcomes.append(_planned_outcome(item, "failed", str(exc)))
            continue
        group = f"{item.model}|{item.dataset}"  # what the folder's dataset verdicts join by
        not_located = str(done.result.info.get("not_located", ""))
        outcomes.append(
            replace(
                done.record,
                dataset=item.dataset,
                source=item.file,
                group=group,
                message=not_located,
            )
        )
    return sorted(outcomes, key=lambda o: (o.model, o.dataset, o.test, o.source))


def folder_dataset_verdicts(
    outcomes: Sequence[CellResult], experiment: str, outputs_dir: Path
) -> list[DatasetOutcome]:
    """The dataset verdict of each model × dataset among the rescored files (two or more
    tests of rows seen), each logged as a run of ``experiment`` beside the files' runs."""
    from tabmem.api import compose_config, outputs_path
    from tabmem.report.dataset_verdicts import dataset_outcomes, rule_of
    from tabmem.tracking.store import TrackingStore

    cells = [o for o in outcomes if o.status == "finished"]
    cfg = compose_config([f"outputs_dir={outputs_dir}", f"experiment={experiment}"])
    store = TrackingStore.at(outputs_path(cfg), experiment)
    return dataset_outcomes(cells, rule_of(cfg), store)


def _outcome(file: str, model: str, dataset: str, test: str, status: str, why: str) -> CellResult:
    """A file × test that was not rescored, and why."""
    return CellResult(model, dataset, test, "original", status, message=why, source=file)


def _planned_outcome(item: Planned, status: str, why: str) -> CellResult:
    return _outcome(item.file, item.model, item.dataset, item.test, status, why)
