"""Shared fixtures: a temporary outputs folder and small hand-made datasets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
os.environ.pop("MLFLOW_TRACKING_URI", None)


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
