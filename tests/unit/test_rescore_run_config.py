"""Rescoring a run's own queries.json reads the cell from the config.yaml beside it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tabmem.errors import ConfigError
from tabmem.rescore import cli


def _run_folder(tmp_path: Path, **config: object) -> Path:
    cell = {
        "dataset": {"name": "iris", "path": None},
        "test": {"name": "row_completion", "n_queries": 15},
        "model": {"name": "oracle-memorizer"},
        "transform": {"name": "perturbed"},
        "seed": 3,
        **config,
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cell))
    queries = tmp_path / "queries.json"
    queries.write_text("[]")
    return queries


@pytest.fixture
def calls(monkeypatch) -> list[tuple]:
    seen: list[tuple] = []

    def fake(path, dataset, test, model, **options):
        seen.append((dataset, test, model, options))
        located = SimpleNamespace(queries=[], lines=0, missing=0)
        result = SimpleNamespace(verdict=SimpleNamespace(value="no_evidence"))
        return SimpleNamespace(located=located, result=result, run_id="r")

    monkeypatch.setattr(cli, "run_rescore", fake)
    return seen


def _rescore(*argv: str) -> int:
    return cli.main([*argv, "--outputs-dir=/tmp/unused"])


def test_a_runs_queries_json_needs_no_flags(tmp_path: Path, calls, capsys) -> None:
    queries = _run_folder(tmp_path)
    assert _rescore(str(queries)) == 0, capsys.readouterr().err
    dataset, test, model, options = calls[0]
    assert (dataset, test, model) == ("iris", "row_completion", "oracle-memorizer")
    assert (options["transform"], options["seed"]) == ("perturbed", 3)


def test_flags_still_win_over_the_config(tmp_path: Path, calls) -> None:
    queries = _run_folder(tmp_path)
    assert _rescore(str(queries), "--test=first_token", "--seed=5") == 0
    _, test, _, options = calls[0]
    assert test == "first_token" and options["seed"] == 5
    assert options["settings"] == []  # row_completion's settings are not first_token's


def test_the_tests_recorded_settings_are_rescored_with_and_set_overrides_them(
    tmp_path: Path, calls
) -> None:
    queries = _run_folder(tmp_path, test={"name": "row_completion", "alpha": 0.05, "k": None})
    assert _rescore(str(queries), "--set", "alpha=0.01") == 0
    settings = calls[0][3]["settings"]
    assert set(settings[:-1]) == {'name="row_completion"', "alpha=0.05"}  # k: chosen at run time
    assert settings[-1] == "alpha=0.01"  # the later setting wins


def test_a_users_file_is_found_by_its_path(tmp_path: Path, calls) -> None:
    data = tmp_path / "mine.csv"
    queries = _run_folder(tmp_path, dataset={"name": "mine", "path": str(data)})
    assert _rescore(str(queries)) == 0
    assert calls[0][0] == str(data)
    fico = _run_folder(tmp_path, dataset={"name": "fico", "path": str(data)})
    assert _rescore(str(fico)) == 0
    assert calls[1][0] == "fico" and calls[1][3]["data_path"] == data


def test_without_a_config_the_flags_are_still_asked_for(tmp_path: Path, calls, capsys) -> None:
    queries = tmp_path / "queries.json"
    queries.write_text("[]")
    assert _rescore(str(queries)) == 1
    err = capsys.readouterr().err
    assert "--dataset, --test, --model-name" in err and "config.yaml" in err
    assert not calls
    flags = SimpleNamespace(file=queries, dataset="iris", test=None, model_name=None)
    with pytest.raises(ConfigError, match="--test, --model-name"):
        cli._one_file(flags)
