"""A grid cell's job: its typed plan, the skip rules of grids, the outputs folder, and the
per-test files the end-of-run summary reads (``cell-*.json``, and ``plan-*.json`` in a dry
run). The runner, the dry run and the summary share these. (Not ``grid``: ``tabmem.grid`` is
the Python API's function.)

The entry points (``tabmem run``, the Python API, the dry run) read Hydra's composed config
once (``tabmem.intake``), into a ``CellPlan`` among the rest of a cell's job; the one path that
runs a cell (``tabmem.execute.execute``) and everything below it read the plan, never the config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabmem.cell import Cell, cell_params

if TYPE_CHECKING:
    from tabmem.data import Dataset
    from tabmem.data.dataset import DatasetSpec

CELL_GLOB = "cell-*.json"
PLAN_GLOB = "plan-*.json"
SPEND_LEDGER = "spend.json"


@dataclass(frozen=True)
class PlannedTest:
    """One test of a cell: its ``name``, its ``settings`` as composed (plain values, which the
    test loads into its typed settings) and the cell's parameters with them (``params``:
    what the run records, and its identity)."""

    name: str
    settings: Mapping[str, Any]
    params: Mapping[str, Any]

    @classmethod
    def of(cls, cfg: Any, name: str, test_cfg: Any) -> PlannedTest:
        """Test ``name`` of the composed cell ``cfg``, its composed config ``test_cfg``."""
        return cls(name, _plain(test_cfg), cell_params({**cfg, "test": test_cfg}))


@dataclass(frozen=True)
class CellPlan:
    """What one cell runs and where its answers are kept, read once from the composed config:
    the model's, the dataset's and the transform's configs as plain values, the seed, the tests
    (each member of a suite), the outputs folder (response cache, weights, batches), and whether
    it sends through a Batch API and draws progress bars."""

    cell: Cell
    model: Mapping[str, Any]
    dataset: DatasetSpec
    transform: Mapping[str, Any]
    seed: int
    tests: tuple[PlannedTest, ...]
    outputs: Path
    batch: bool = False
    progress: bool = True

    @classmethod
    def of(cls, cfg: Any, tests: Sequence[tuple[str, Any]] | None = None) -> CellPlan:
        """The plan of the composed cell ``cfg`` (after its preflight: its values are of their
        kinds); ``tests``: the (name, composed config) pairs to run, by default every test the
        cell runs."""
        from tabmem.data.registry import spec_from_config

        chosen = test_plan(cfg.test) if tests is None else tests
        return cls(
            cell=Cell.from_config(cfg),
            model=_plain(cfg.model),
            dataset=spec_from_config(_plain(cfg.dataset)),
            transform=_plain(cfg.transform),
            seed=int(cfg.seed),
            tests=tuple(PlannedTest.of(cfg, name, test_cfg) for name, test_cfg in chosen),
            outputs=outputs_dir(cfg),
            batch=bool(cfg.get("batch")),
            progress=bool(cfg.get("progress", True)),
        )

    def test_cell(self, test: PlannedTest) -> Cell:
        """The cell's name parts with ``test``'s name."""
        return replace(self.cell, test=test.name)

    @property
    def cache_path(self) -> Path:
        return self.outputs / "cache" / "responses.sqlite"

    @property
    def weights_dir(self) -> Path:
        return self.outputs / "weights"

    @property
    def batch_dir(self) -> Path | None:
        """Where a grid with ``batch=true`` keeps its pending batches' ids; None without it."""
        return self.outputs / "batches" if self.batch else None

    def load_data(self) -> Dataset:
        """The dataset as the cell's tests see it: the file, transformed with the seed."""
        from tabmem.data import load_dataset
        from tabmem.data.transforms import apply_transform

        return apply_transform(load_dataset(self.dataset), self.transform, self.seed)


def _plain(node: Any) -> dict[str, Any]:
    """A composed config's section as plain values, its interpolations resolved."""
    from omegaconf import OmegaConf

    if OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]
    return dict(node)


def outputs_dir(cfg: Any) -> Path:
    """The resolved ``outputs_dir``: runs, MLflow store, cache and weights live there."""
    return Path(str(cfg.outputs_dir)).expanduser().resolve()


def test_plan(test_cfg: Any) -> list[tuple[str, Any]]:
    """The tests a cell runs: one, or each member of a suite such as ``test=memorization``."""
    from tabmem.suites import suite_plan

    return suite_plan(test_cfg)


def skip_reason(cfg: Any, test: str) -> str:
    """Why a grid that sets ``skip_unrunnable: true`` skips a test of this cell ('' to run it).

    Only grids skip (``conf/grid/paper.yaml``): a single run or a plain sweep still fails with
    the error, so a missing file someone asked for by name is never passed over in silence.
    """
    if not cfg.get("skip_unrunnable"):
        return ""
    from tabmem.battery.base import needs_of
    from tabmem.data.registry import resolve_path, spec_from_config
    from tabmem.errors import DatasetError
    from tabmem.llm.base import FIT

    only = cfg.get("only_datasets")
    if only and str(cfg.dataset.name) not in only:
        return f"this part of the grid runs on {', '.join(map(str, only))} only"
    models = cfg.get("only_models")
    if models and str(cfg.model.name) not in models:
        return f"this part of the grid runs the models {', '.join(map(str, models))} only"
    if cfg.model.get("backend") == "baseline" and FIT not in needs_of(test):
        return f"model '{cfg.model.name}' is a statistical baseline: it runs learning tests only"
    try:
        resolve_path(spec_from_config(cfg.dataset))
    except DatasetError as exc:
        return f"dataset file not present: {exc}"
    return ""
