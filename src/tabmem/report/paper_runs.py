"""The tracked runs the paper tables read, with the lookups every table and figure needs.

Everything a table shows comes from here: one frame of the newest FINISHED run per cell
(model × dataset × test × transform, and the sampling temperature), read once from MLflow,
and the runs' artifacts on demand. Nothing is carried over from the papers.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd
import yaml

from tabmem.battery.base import claiming, reading_datasets
from tabmem.paths import conf_dir
from tabmem.report.fill_commands import MissingCells, dataset_configs
from tabmem.suites import suite_members
from tabmem.tracking.runs import latest_finished, load_runs

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


@functools.cache
def paper_datasets() -> tuple[str, ...]:
    """The datasets of the paper grid, read from conf/grid/paper.yaml (the one list of them),
    in the order the tables list them."""
    grid = yaml.safe_load((conf_dir() / "grid" / "paper.yaml").read_text())
    listed = grid["hydra"]["sweeper"]["params"]["dataset"]
    return tuple(name.strip() for name in listed.split(",") if name.strip())


@functools.cache
def suite_tests(suite: str) -> tuple[str, ...]:
    """The member tests of a suite the paper grid runs (``conf/test/<suite>.yaml``, the one
    list of them: ``memorization``, ``knowledge``), in the suite's order."""
    config = yaml.safe_load((conf_dir() / "test" / f"{suite}.yaml").read_text())
    return suite_members(config) or ()


def tabular_tests() -> list[str]:
    """Tests whose cells are rows of the dataset tables: every registered test that reads its
    cell's dataset, but forecasting, whose datasets are series with a table of their own."""
    return sorted(set(reading_datasets()) - set(claiming("forecast")))


BASELINES = ("logistic-regression", "gradient-boosted-tree", "majority-class")
"""The statistical baselines the learning tables always show (``model=…``)."""

ANY_MODEL = "<model>"
"""The column a table shows when no language model has a run: its cells say what to run."""

TRANSFORMS = ("original", "perturbed", "task", "statistical")
TEMPERATURE = "param.test.temperature"


@dataclass
class PaperRuns:
    """The runs of one store, and which models, baselines and datasets the tables show."""

    tracking_uri: str
    frame: pd.DataFrame
    experiments: list[str]
    models: list[str]
    baselines: list[str]
    datasets: list[str]
    _artifacts: dict[tuple[str, str], pd.DataFrame | None] = field(
        default_factory=dict, init=False, repr=False
    )
    _index: dict[tuple[str, ...], list[int]] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def load(
        cls,
        tracking_uri: str,
        experiments: Sequence[str] | None = None,
        models: Sequence[str] | None = None,
        datasets: Sequence[str] | None = None,
    ) -> PaperRuns:
        """Read the store once. ``models`` picks the language models (else every one, by
        name); the statistical baselines are always read."""
        frame = load_runs(tracking_uri, experiments, distinct=(TEMPERATURE,))
        if TEMPERATURE not in frame:
            frame[TEMPERATURE] = None
        baselines = [*BASELINES, *sorted(set(_baseline_models(frame)) - set(BASELINES))]
        names = list(models) if models else sorted(set(frame["model"]) - set(baselines))
        names = [m for m in names if m not in baselines]
        frame = frame[frame["model"].isin([*names, *baselines])].reset_index(drop=True)
        return cls(
            tracking_uri=tracking_uri,
            frame=frame,
            experiments=list(experiments or []),
            models=names or [ANY_MODEL],
            baselines=baselines,
            datasets=list(datasets) if datasets else _dataset_rows(frame),
        )

    @property
    def experiment(self) -> str:
        """The experiment a command filling a missing cell should log to."""
        return self.experiments[0] if self.experiments else ""

    def missing_cells(self) -> MissingCells:
        """No missing cell yet, for a table of these runs: the experiment its command logs to,
        and the file each user's own dataset was read from (its newest run's
        ``dataset.path``), so the command runs as written."""
        paths: dict[str, str] = {}
        if "param.dataset.path" in self.frame:
            own = self.frame[~self.frame["dataset"].isin(dataset_configs())]
            own = own.sort_values("start_time")  # the newest run's path last, so it wins
            for dataset, path in zip(own["dataset"], own["param.dataset.path"], strict=True):
                if isinstance(path, str) and path not in ("", "None"):
                    paths[str(dataset)] = path
        return MissingCells(self.experiment, paths)

    def newest(self) -> pd.DataFrame:
        """One run per (model, dataset, test, transform): the newest at any temperature."""
        return latest_finished(self.frame)

    def cell(
        self, model: str, dataset: str, test: str, transform: str = "original"
    ) -> pd.Series | None:
        """The newest finished run of one cell, or None when there is none."""
        rows = self._rows(model, dataset, test, transform)
        return self.frame.iloc[rows[-1]] if rows else None

    def by_temperature(self, model: str, dataset: str, test: str) -> list[pd.Series]:
        """The newest run of a sampling cell at each temperature it was run at, coldest first."""
        found = [self.frame.iloc[i] for i in self._rows(model, dataset, test, "original")]
        return sorted(found, key=lambda run: _number(run.get(TEMPERATURE)))

    def _rows(self, model: str, dataset: str, test: str, transform: str) -> list[int]:
        """Positions of a cell's runs in ``frame``, oldest first (an index built once)."""
        if not self._index and not self.frame.empty:
            columns = [self.frame[c].tolist() for c in ("model", "dataset", "test", "transform")]
            times = self.frame["start_time"].to_numpy()
            for position in np.argsort(times, kind="stable"):
                key = tuple(column[position] for column in columns)
                self._index.setdefault(key, []).append(int(position))
        return self._index.get((model, dataset, test, transform), [])

    def runs_of(self, test: str) -> pd.DataFrame:
        """Every run of one test (all models, datasets, transforms and temperatures)."""
        return self.frame[self.frame["test"] == test] if not self.frame.empty else self.frame

    def artifact_table(self, run_id: str, name: str) -> pd.DataFrame | None:
        """A table artifact of a run (``log_table`` JSON) as a DataFrame; None if it has none."""
        key = (run_id, name)
        if key not in self._artifacts:
            local = self._local_artifact(run_id, name)
            self._artifacts[key] = (
                _table(json.loads(local.read_text()))
                if local is not None
                else _read_table(self.client, run_id, name)
            )
        return self._artifacts[key]

    def _local_artifact(self, run_id: str, name: str) -> Path | None:
        """The artifact's file when the run's artifacts are in a local folder (no download)."""
        rows = self.frame.loc[self.frame["run_id"] == run_id, "artifact_uri"]
        uri = str(rows.iloc[0]) if len(rows) else ""
        if not uri.startswith("file://"):
            return None
        path = Path(unquote(urlparse(uri).path)) / name
        return path if path.is_file() else None

    @cached_property
    def client(self) -> Any:
        """One MLflow client for every artifact read."""
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.tracking_uri)


def _number(value: object) -> float:
    """A temperature as a number for sorting (unknown ones last)."""
    number = pd.to_numeric(value, errors="coerce")
    return float(number) if pd.notna(number) else float("inf")


def _baseline_models(frame: pd.DataFrame) -> list[str]:
    column = "param.model.backend"
    if frame.empty or column not in frame:
        return []
    return sorted(set(frame.loc[frame[column] == "baseline", "model"]))


def _dataset_rows(frame: pd.DataFrame) -> list[str]:
    """The paper's datasets, then any other dataset with a run of a tabular test."""
    seen = set() if frame.empty else set(frame.loc[frame["test"].isin(tabular_tests()), "dataset"])
    return [*paper_datasets(), *sorted(seen - set(paper_datasets()))]


def _read_table(client: Any, run_id: str, name: str) -> pd.DataFrame | None:
    from mlflow.exceptions import MlflowException

    with tempfile.TemporaryDirectory() as folder:
        try:
            path = client.download_artifacts(run_id, name, folder)
        except (MlflowException, OSError):
            return None
        return _table(json.loads(Path(path).read_text()))


def _table(table: dict[str, Any]) -> pd.DataFrame:
    """A ``log_table`` JSON document as a DataFrame."""
    return pd.DataFrame(table.get("data", []), columns=table.get("columns"))
