"""Every ``conf/test/*.yaml`` runs: a single test's file names a registered test (the same
name as the file) and loads into that test's typed settings (every field it declares, nothing
else), every declared setting is read, and a suite lists registered tests once: composed under
their own names, or named by the claims they make."""

import ast
import inspect
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from tabmem.api import compose_config
from tabmem.battery.base import CLAIMS, claiming_in_order, registry
from tabmem.errors import ConfigError
from tabmem.jobs import test_plan as plan_of
from tabmem.suites import suite_members

CONF = Path(__file__).resolve().parents[2] / "conf" / "test"
FILES = sorted(CONF.glob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_config_names_registered_tests(path):
    config = yaml.safe_load(path.read_text())
    assert config["name"] == path.stem
    tests = registry()
    members = suite_members(config)
    if members is None:
        assert config["name"] in tests
        return
    assert "suite" not in config, "a suite lists its members once: its defaults or its claims"
    assert set(members) <= set(tests)
    assert set(config.get("claims") or []) <= set(CLAIMS)


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


def plain(node: object) -> dict:
    return OmegaConf.to_container(node, resolve=True)


def composed(overrides: list[str]) -> dict:
    return plain(compose_config(overrides).test)


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
    for name, section in plan_of(compose_config(overrides).test):
        assert settings_class(name).load(plain(section)).name == name


def test_a_suite_of_claims_runs_every_test_that_makes_them_with_its_own_counts():
    plan = dict(plan_of(compose_config(["test=lab_rows"]).test))
    assert list(plan) == claiming_in_order("rows_seen")
    assert plan["row_completion"]["n_queries"] == 20  # lab_rows' own count ...
    assert plan["header"] == plain(compose_config(["test=header"]).test)  # ... else the test's
    chosen = plan_of(compose_config(["test=calibration_rows", "+test.suite=[sample]"]).test)
    assert [name for name, _ in chosen] == ["sample"]


def test_a_suite_refuses_a_section_for_a_test_it_does_not_run():
    cfg = compose_config(["test=calibration_rows", "+test.feature_names={n_queries: 3}"])
    with pytest.raises(ConfigError, match="feature_names"):
        plan_of(cfg.test)


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
