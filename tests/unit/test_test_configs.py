"""Every ``conf/test/*.yaml`` runs: a single test's file names a registered test (the same
name as the file) and loads into that test's typed settings (every field it declares, nothing
else), every declared setting is read, and a suite lists registered tests, each composed under
its own name."""

import ast
import inspect
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from tabmem.api import compose_config
from tabmem.battery.base import registry

CONF = Path(__file__).resolve().parents[2] / "conf" / "test"
FILES = sorted(CONF.glob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_config_names_registered_tests(path):
    config = yaml.safe_load(path.read_text())
    assert config["name"] == path.stem
    tests = registry()
    if "suite" not in config:
        assert config["name"] in tests
        return
    members = [entry for entry in config.get("defaults", []) if isinstance(entry, str)]
    composed = {entry.split("@")[1] for entry in members if "@" in entry}
    assert set(config["suite"]) <= set(tests)
    assert set(config["suite"]) <= composed


def test_every_registered_test_has_a_config():
    assert set(registry()) <= {p.stem for p in FILES}


def test_a_baseline_is_refused_by_the_runner_for_tests_that_need_text():
    from tabmem.battery.base import inapplicable_reason
    from tabmem.llm.baselines import BaselineBackend
    from tabmem.llm.client import LanguageModel

    model = LanguageModel(BaselineBackend("lr", "logistic_regression", {}), "lr")
    reason = inapplicable_reason("header", model)
    assert "statistical baseline, not a language model" in reason
    assert "test=fewshot_predict and test=statistical_learning" in reason
    assert inapplicable_reason("fewshot_predict", model) == ""
    assert "gives no log-probabilities" in inapplicable_reason("min_k_prob", model)


def settings_class(name: str) -> type:
    return registry()[name].__self__.settings


def composed(overrides: list[str]) -> dict:
    return OmegaConf.to_container(compose_config(overrides).test, resolve=True)


@pytest.mark.parametrize("name", sorted(registry()))
def test_the_config_loads_into_the_tests_typed_settings(name):
    """The YAML holds every setting the test declares, nothing else, each of its type."""
    settings = settings_class(name).load(composed([f"test={name}"]))
    assert settings.name == name


@pytest.mark.parametrize(
    "overrides",
    [
        ["test=memorization"],
        ["test=knowledge"],
        ["test=probes"],
        ["test=calibration"],
        ["+calibrate=embedded-twins"],
        ["+paper=samples-hot"],
    ],
    ids=lambda o: o[0],
)
def test_suites_and_grid_parts_load_into_each_members_settings(overrides):
    config = composed(overrides)
    members = config.get("suite") or [config["name"]]
    for name in members:
        section = config[name] if "suite" in config else config
        assert settings_class(name).load(section).name == name


def attributes_and_strings(path: Path) -> set[str]:
    """Every attribute a module reads (``p.alpha``) and every string it holds (a setting's
    name kept in a class attribute, read with ``getattr``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
    return found


@pytest.mark.parametrize("name", sorted(registry()))
def test_every_declared_setting_is_read(name):
    """A declared setting no step reads would be a knob that turns nothing; the test's
    modules, those of its base classes, and the prompt modules they word with are read."""
    test = registry()[name].__self__
    modules = {
        Path(inspect.getsourcefile(c))
        for c in type(test).__mro__
        if c.__module__.startswith("tabmem.battery.")
    }
    modules |= set((Path(inspect.getsourcefile(registry)).parents[1] / "prompts").glob("*.py"))
    read = set().union(*(attributes_and_strings(m) for m in modules))
    declared = {f.name for f in fields(test.settings)} - {"name"}
    assert not declared - read, f"{name} declares settings it never reads"
