"""Settings and data files that would fail every test of a cell are refused at once: before
the tracking store opens and before the model is built."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from harness import settings_of
from omegaconf import OmegaConf
from rich.console import Console

from tabmem import intake, runner
from tabmem.errors import ConfigError, DatasetError
from tabmem.paths import conf_dir
from tabmem.tracking.store import TrackingStore


def _cfg(tmp_path: Path, text: str = "a,b\n1,2\n3,4\n", test: str = "header", **top: object):
    path = tmp_path / "mine.csv"
    path.write_text(text)
    dataset = OmegaConf.load(conf_dir() / "dataset" / "csv.yaml")
    dataset.path, dataset.name = str(path), "mine"
    return OmegaConf.create(
        {
            "model": {"name": "m"},
            "dataset": dataset,
            "test": settings_of(test),
            "transform": {"name": "original"},
            "seed": 0,
            "budget_usd": None,
            "force": False,  # the cell is looked up in its store (none yet) before the preflight
            "outputs_dir": str(tmp_path),
            "experiment": "preflight",
            "tracking": {"uri": None, "artifact_root": None},
            "show_queries": False,
            **top,
        }
    )


@pytest.mark.parametrize("limit", [-1, -0.01, "abc", float("nan")])
def test_a_budget_that_is_no_budget_is_one_sentence(tmp_path: Path, limit: object) -> None:
    problem = intake.preflight_error(_cfg(tmp_path, budget_usd=limit))
    assert isinstance(problem, ConfigError)
    assert str(problem).startswith(f"budget_usd={limit} is not a budget")


@pytest.mark.parametrize("limit", [None, 0, 5, "2.5"])
def test_a_budget_of_zero_or_more_is_taken(tmp_path: Path, limit: object) -> None:
    assert intake.preflight_error(_cfg(tmp_path, budget_usd=limit)) is None


def test_a_malformed_data_file_is_found_before_the_store_opens(tmp_path: Path, monkeypatch):
    cfg = _cfg(tmp_path, text="a,b\n1,2\n3\n")
    assert isinstance(intake.preflight_error(cfg), DatasetError)
    out = io.StringIO()
    said_before_store: list[str] = []

    def store_written(*_args, **_kwargs):
        said_before_store.append(out.getvalue())
        raise KeyboardInterrupt  # enough: the store's first write is where the slow part starts

    monkeypatch.setattr(TrackingStore, "log_cell", store_written)
    with pytest.raises(KeyboardInterrupt):
        runner.run_cell(cfg, "", tmp_path, console=Console(file=out, width=200))
    assert "failed" in said_before_store[0] and "record 3" in said_before_store[0]


# --- settings: types and ranges, from each test's settings class (issue 56) -------------------


def _whole_number_settings():
    """Every whole-number setting of every test (and of its sections), as (test, path) pairs."""
    import dataclasses
    import typing

    from tabmem.battery.base import registry
    from tabmem.battery.settings import TestSettings

    def walk(settings, prefix):
        hints = typing.get_type_hints(settings)
        for found in dataclasses.fields(settings):
            kind = hints[found.name]
            if isinstance(kind, type) and issubclass(kind, TestSettings):
                yield from walk(kind, (*prefix, found.name))
            elif kind is int or kind == int | None:
                yield (*prefix, found.name)

    for name, function in sorted(registry().items()):
        for path in walk(function.__self__.settings, ()):
            yield name, path


def _problems(test: str, path: tuple[str, ...], value: object) -> list[str]:
    """What the check says of test ``test``'s shipped settings with ``path`` set to ``value``."""
    from tabmem.battery.base import get_test
    from tabmem.preflight import settings_problems

    values = settings_of(test)
    section = values
    for key in path[:-1]:
        section = section[key]
    section[path[-1]] = value
    settings = get_test(test).__self__.settings
    return settings_problems(settings, values, "test.", f"test={test}")


def test_the_shipped_settings_of_every_test_pass_the_check():
    from tabmem.battery.base import get_test, registry
    from tabmem.preflight import settings_problems

    for name in sorted(registry()):
        settings = get_test(name).__self__.settings
        assert settings_problems(settings, settings_of(name), "test.", f"test={name}") == []


def test_every_whole_number_setting_of_every_test_refuses_a_negative_count():
    checked = 0
    for test, path in _whole_number_settings():
        problems = _problems(test, path, -3)
        dotted = "test." + ".".join(path)
        assert problems == [
            next(p for p in problems if p.startswith(f"{dotted}=-3 does not fit test={test}"))
        ], (test, path, problems)
        checked += 1
    assert checked > 100  # every test has several


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (
            0,
            "test.n_queries=0 does not fit test=row_completion: it takes a whole number of at "
            "least 1 (a test asked for nothing has nothing to tell).",
        ),
        (2.5, "test.n_queries=2.5 does not fit test=row_completion: it takes a whole number"),
        ("abc", "test.n_queries='abc' does not fit test=row_completion"),
        (True, "test.n_queries=true does not fit test=row_completion"),
    ],
)
def test_a_query_count_of_zero_or_a_fraction_is_refused_in_one_sentence(value, said):
    [problem] = _problems("row_completion", ("n_queries",), value)
    assert problem.startswith(said)


@pytest.mark.parametrize(
    ("test", "path", "value"),
    [
        ("header", ("alpha",), 1.5),
        ("header", ("alpha",), 0),
        ("row_completion", ("weak_alpha",), -0.1),
        ("min_k_prob", ("k_percent",), 0),
        ("sample", ("temperature",), -1.0),
        ("header", ("split_rows",), [2, 0]),
        ("existence", ("n_options",), 1),
        ("header", ("stop_on_divergence",), "maybe"),
    ],
)
def test_levels_percentages_and_flags_out_of_their_range_are_refused(test, path, value):
    [problem] = _problems(test, path, value)
    assert problem.startswith(f"test.{path[0]}") and "does not fit" in problem


def test_a_suite_member_setting_is_named_as_the_command_line_names_it(tmp_path: Path) -> None:
    from tabmem.preflight import cell_problems

    cfg = _cfg(tmp_path, test="memorization")
    cfg.test.row_completion.n_queries = -1
    [problem] = cell_problems(cfg)
    assert str(problem).startswith("test.row_completion.n_queries=-1 does not fit")


def test_a_missing_key_is_a_problem_of_the_cell_and_said_as_the_backend_says_it(
    tmp_path: Path, monkeypatch
) -> None:
    from tabmem.errors import ProviderError
    from tabmem.llm.litellm_backend import LiteLLMBackend
    from tabmem.preflight import cell_problems

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = _cfg(tmp_path)
    cfg.model = OmegaConf.load(conf_dir() / "model" / "gpt-4.yaml")
    [problem] = cell_problems(cfg)
    assert isinstance(problem, ProviderError)
    with pytest.raises(ProviderError) as raised:
        LiteLLMBackend.from_config(cfg.model, type("Ctx", (), {"require_credentials": True})())
    assert str(problem) == str(raised.value)
    assert cell_problems(cfg, credentials=False) == []
