"""Settings and data files that would fail every test of a cell are refused at once: before
the tracking store opens and before the model is built."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from rich.console import Console

from tabmem import runner
from tabmem.errors import ConfigError, DatasetError
from tabmem.paths import conf_dir


def _cfg(tmp_path: Path, text: str = "a,b\n1,2\n3,4\n", **top: object):
    path = tmp_path / "mine.csv"
    path.write_text(text)
    dataset = OmegaConf.load(conf_dir() / "dataset" / "csv.yaml")
    dataset.path, dataset.name = str(path), "mine"
    return OmegaConf.create(
        {
            "model": {"name": "m"},
            "dataset": dataset,
            "test": {"name": "header"},
            "transform": {"name": "original"},
            "seed": 0,
            "budget_usd": None,
            "force": False,  # the cell is looked up in its store (none yet) before the preflight
            "outputs_dir": str(tmp_path),
            "experiment": "preflight",
            "tracking": {"uri": None, "artifact_root": None},
            **top,
        }
    )


@pytest.mark.parametrize("limit", [-1, -0.01, "abc", float("nan")])
def test_a_budget_that_is_no_budget_is_one_sentence(tmp_path: Path, limit: object) -> None:
    problem = runner.preflight_error(_cfg(tmp_path, budget_usd=limit))
    assert isinstance(problem, ConfigError)
    assert str(problem).startswith(f"budget_usd={limit} is not a budget")


@pytest.mark.parametrize("limit", [None, 0, 5, "2.5"])
def test_a_budget_of_zero_or_more_is_taken(tmp_path: Path, limit: object) -> None:
    assert runner.preflight_error(_cfg(tmp_path, budget_usd=limit)) is None


def test_a_malformed_data_file_is_found_before_the_store_opens(tmp_path: Path, monkeypatch):
    cfg = _cfg(tmp_path, text="a,b\n1,2\n3\n")
    assert isinstance(runner.preflight_error(cfg), DatasetError)
    out = io.StringIO()
    said_before_store: list[str] = []

    def store_opened(_cfg):
        said_before_store.append(out.getvalue())
        raise KeyboardInterrupt  # enough: the store is where the slow part starts

    monkeypatch.setattr(runner, "open_store", store_opened)
    with pytest.raises(KeyboardInterrupt):
        runner.run_cell(cfg, "", tmp_path, console=Console(file=out, width=200))
    assert "failed" in said_before_store[0] and "record 3" in said_before_store[0]
