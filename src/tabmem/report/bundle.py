"""A reproducibility bundle of a finished grid: what a researcher hands a reviewer.

``tabmem bundle EXPERIMENT`` writes one folder (docs/rescoring.md):

    bundle.json          the manifest: package versions, each data file's sha256, every cell
                         with its seed and recorded verdict, the dataset verdicts
    verdicts.md          the same verdicts as a table to read
    cells/<run id>/      each finished cell run's resolved config.yaml, result.yaml and its
                         prompts and answers (queries.json), as the run logged them

The cells are the runs ``tabmem report`` and ``tabmem tables`` read (``load_runs``: the newest
finished run of each cell). ``tabmem rescore BUNDLE`` (``tabmem.rescore.bundle``) scores the
answers again, offline, and says which verdicts it reproduces.
"""

from __future__ import annotations

import json
import platform
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tabmem.data.provenance import measure
from tabmem.data.registry import resolve_path, spec_from_config
from tabmem.errors import ConfigError
from tabmem.markdown import markdown_table
from tabmem.report.cell_text import number
from tabmem.report.dataset_verdicts import DATASET_TEST, combined_runs
from tabmem.report.paper_runs import TEMPERATURE
from tabmem.tracking.runs import all_runs, latest_finished

if TYPE_CHECKING:
    import pandas as pd
    from mlflow.tracking import MlflowClient

FORMAT = "tabmem-bundle/1"
MANIFEST = "bundle.json"
TABLE = "verdicts.md"
CELLS = "cells"
CELL_FILES = ("config.yaml", "result.yaml", "queries.json")
"""What a cell's folder holds of its run's artifacts (queries.json only where it asked)."""


@dataclass(frozen=True)
class BundleCell:
    """One finished cell run as the bundle records it: where its files are, its seed and its
    recorded verdict with the figures behind it."""

    folder: str
    run_id: str
    model: str
    dataset: str
    test: str
    transform: str
    seed: int
    verdict: str
    p_value: float | None = None
    n_hits: int | None = None
    n_queries: int | None = None

    @property
    def name(self) -> str:
        return f"{self.model} | {self.dataset} | {self.test} | {self.transform}"


@dataclass(frozen=True)
class BundleDatasetVerdict:
    """One dataset verdict of the grid (its tests of rows seen combined), as recorded, with the
    run each combined test read (by the test's label there: a test run twice is ``<test>-2``)."""

    model: str
    dataset: str
    transform: str
    seed: int
    verdict: str
    p_value: float | None
    tests: dict[str, str]
    run_id: str

    @property
    def name(self) -> str:
        return f"{self.model} | {self.dataset} | {self.transform}"


@dataclass(frozen=True)
class DataFile:
    """A data file the cells read: where it was, and its sha256."""

    file: str
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """Everything ``bundle.json`` holds."""

    experiment: str
    created: str
    python: str
    packages: dict[str, str]
    data: dict[str, DataFile]
    cells: list[BundleCell]
    dataset_verdicts: list[BundleDatasetVerdict] = field(default_factory=list)
    format: str = FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        """The manifest of the bundle in ``folder``; one sentence where it is none."""
        path = folder / MANIFEST
        if not path.is_file():
            raise ConfigError(
                f"{folder} is not a bundle: it has no {MANIFEST} (tabmem bundle EXPERIMENT "
                "writes one)."
            )
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("format") != FORMAT:
                raise ValueError(f"format {raw.get('format')!r}, not {FORMAT!r}")
            return cls(
                **{
                    **raw,
                    "data": {k: DataFile(**v) for k, v in raw["data"].items()},
                    "cells": [BundleCell(**c) for c in raw["cells"]],
                    "dataset_verdicts": [
                        BundleDatasetVerdict(**d) for d in raw.get("dataset_verdicts", [])
                    ],
                }
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{path} is not a tabmem bundle's manifest ({exc}).") from exc


def package_versions() -> dict[str, str]:
    """The installed versions of tabmem and of the packages it requires (its extras left out),
    so a reviewer sees what computed the verdicts."""
    names = ["tabmem"]
    for requirement in metadata.requires("tabmem") or []:
        if "extra ==" not in requirement:
            names.append(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0])
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def data_file(dataset: Mapping[str, Any], path: Path | None = None) -> Path:
    """The file a cell's dataset config (its ``config.yaml`` section) reads, or ``path`` in its
    place; a one-sentence error where there is none."""
    config = {**dataset, "path": str(path)} if path is not None else dict(dataset)
    return resolve_path(spec_from_config(config))


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, as ``data/provenance.json`` records it."""
    return measure(path).sha256


def write_bundle(tracking_uri: str, experiment: str, out: Path) -> Manifest:
    """Write the bundle of ``experiment``'s finished cells into the folder ``out`` (new or
    empty) and return its manifest; one sentence for an unknown experiment, one without a
    finished cell, or an ``out`` that holds files already."""
    runs = all_runs(tracking_uri, [experiment])
    if runs.empty:
        known = sorted(set(all_runs(tracking_uri)["experiment"]))
        raise ConfigError(
            f"No experiment '{experiment}' with runs in {tracking_uri}"
            + (f"; its experiments: {', '.join(known)}." if known else "; it has no runs.")
        )
    finished = latest_finished(runs, ("param.seed", TEMPERATURE))
    cells = finished[finished["test"] != DATASET_TEST] if not finished.empty else finished
    if cells.empty:
        raise ConfigError(
            f"Experiment '{experiment}' has no finished cell run among its {len(runs)} runs: "
            f"finish its grid first (tabmem run -m ... experiment={experiment})."
        )
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} holds files already: remove it or pass another --out.")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    recorded, data = [], {}
    for _, run in cells.sort_values(["model", "dataset", "test", "transform"]).iterrows():
        folder = Path(CELLS) / run["run_id"]
        present = {a.path for a in client.list_artifacts(run["run_id"])}
        if "config.yaml" not in present:
            raise ConfigError(f"Run {run['run_id']} of {experiment} logged no config.yaml.")
        (out / folder).mkdir(parents=True)
        for name in CELL_FILES:
            if name in present:
                client.download_artifacts(run["run_id"], name, str(out / folder))
        config = yaml.safe_load((out / folder / "config.yaml").read_text(encoding="utf-8"))
        if run["dataset"] not in data:
            dataset = config["dataset"]
            path = data_file(dataset)
            data[run["dataset"]] = DataFile(
                str(dataset.get("path") or dataset.get("file")), file_sha256(path)
            )
        recorded.append(
            BundleCell(
                folder=folder.as_posix(),
                run_id=run["run_id"],
                model=run["model"],
                dataset=run["dataset"],
                test=run["test"],
                transform=run["transform"],
                seed=int(config.get("seed") or 0),
                verdict=run["verdict"],
                p_value=number(run, "p_value"),
                n_hits=_count(run, "n_hits"),
                n_queries=_count(run, "n_queries"),
            )
        )
    manifest = Manifest(
        experiment=experiment,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        python=platform.python_version(),
        packages=package_versions(),
        data=data,
        cells=recorded,
        dataset_verdicts=_dataset_verdicts(finished, client),
    )
    (out / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
    (out / TABLE).write_text(verdict_table(manifest), encoding="utf-8")
    return manifest


def _dataset_verdicts(finished: pd.DataFrame, client: MlflowClient) -> list[BundleDatasetVerdict]:
    """The dataset verdicts among the finished runs, each with the runs it combined (its
    ``test.<label>.run_id`` tags)."""
    rows = finished[finished["test"] == DATASET_TEST] if not finished.empty else finished
    found = []
    for _, row in rows.sort_values(["model", "dataset", "transform"]).iterrows():
        combined = combined_runs(client.get_run(row["run_id"]).data.tags)
        tests = {test: run_id for test, run_id in combined.items() if run_id}
        found.append(
            BundleDatasetVerdict(
                model=row["model"],
                dataset=row["dataset"],
                transform=row["transform"],
                seed=int(float(row.get("param.seed") or 0)),
                verdict=row["verdict"],
                p_value=number(row, "p_value"),
                tests=tests,
                run_id=row["run_id"],
            )
        )
    return found


def _count(run: pd.Series, name: str) -> int | None:
    value = number(run, name)
    return None if value is None else int(value)


def _figure(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def verdict_table(manifest: Manifest) -> str:
    """The bundle's verdicts as Markdown: one line per cell, then the dataset verdicts."""
    cells = [
        [
            c.model,
            c.dataset,
            c.transform,
            c.test,
            c.seed,
            c.verdict,
            _figure(c.p_value),
            "" if c.n_queries is None else f"{c.n_hits}/{c.n_queries}",
            c.folder,
        ]
        for c in manifest.cells
    ]
    header = ["model", "dataset", "transform", "test", "seed", "verdict", "p-value"]
    parts = [
        f"# Verdicts of experiment '{manifest.experiment}'\n\n"
        f"Bundled {manifest.created} with tabmem {manifest.packages.get('tabmem', '?')}. "
        f"Check them: `tabmem rescore <this folder>`.",
        markdown_table([*header, "hits/queries", "files"], cells),
    ]
    if manifest.dataset_verdicts:
        verdicts = [
            [
                d.model,
                d.dataset,
                d.transform,
                d.seed,
                d.verdict,
                _figure(d.p_value),
                ", ".join(d.tests),
            ]
            for d in manifest.dataset_verdicts
        ]
        parts += [
            "## Dataset verdicts (the tests of rows seen combined)",
            markdown_table([*header[:3], *header[4:], "tests"], verdicts),
        ]
    files = [[name, f.file, f"`{f.sha256}`"] for name, f in manifest.data.items()]
    parts += ["## Data files", markdown_table(["dataset", "file", "sha256"], files)]
    return "\n\n".join(parts) + "\n"
