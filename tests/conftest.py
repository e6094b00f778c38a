"""Shared fixtures: new MLflow stores seeded from one template, a temporary outputs folder and
small hand-made datasets."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
os.environ.pop("MLFLOW_TRACKING_URI", None)


STORE_MODULE = "mlflow.store.tracking.sqlalchemy_store"


def seed_new_stores(store_class: type) -> None:
    """Every SQLite store MLflow makes in this process starts as a copy of one template (its
    tables migrated once per session, not seconds per test); runs, experiments and artifacts
    stay each test's own. Subprocesses get theirs from ``harness.run_tabmem``."""
    from harness import seed_store

    original = store_class.__init__

    def seeded(self, db_uri: str, *args, **kwargs) -> None:
        if db_uri.startswith("sqlite:///") and ":memory:" not in db_uri:
            seed_store(Path(db_uri.removeprefix("sqlite:///")))
        original(self, db_uri, *args, **kwargs)

    store_class.__init__ = seeded


class SeedStoresOnImport(importlib.abc.MetaPathFinder):
    """Patches MLflow's SQL store when something first imports it, so that a session that never
    opens a store does not pay for importing MLflow."""

    def find_spec(self, fullname, path, target=None):
        if fullname != STORE_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        load = spec.loader.exec_module

        def exec_module(module) -> None:
            load(module)
            seed_new_stores(module.SqlAlchemyStore)

        spec.loader.exec_module = exec_module
        return spec


def pytest_configure(config: pytest.Config) -> None:
    if STORE_MODULE in sys.modules:
        seed_new_stores(sys.modules[STORE_MODULE].SqlAlchemyStore)
    else:
        sys.meta_path.insert(0, SeedStoresOnImport())


@pytest.fixture(autouse=True)
def no_tracking_uri_leaks():
    """``mlflow.set_tracking_uri`` (some tests read their stores through MLflow's fluent API)
    exports ``MLFLOW_TRACKING_URI``, which tabmem honours: without this, every later sweep and
    ``tabmem.run`` of the session would write into that test's store."""
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    yield
    os.environ.pop("MLFLOW_TRACKING_URI", None)


@pytest.fixture
def project_root() -> Path:
    return ROOT


@pytest.fixture
def csv_dataset(tmp_path: Path):
    """Write a CSV text to a temporary file and return it as a ``Dataset`` named ``name``."""
    from tabmem.data import Dataset, DatasetSpec

    def make(text: str, name: str = "ledger") -> Dataset:
        path = tmp_path / f"{name}.csv"
        path.write_text(text)
        return Dataset(spec=DatasetSpec(name=name, file=path.name), path=path, text=text)

    return make
