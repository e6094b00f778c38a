"""Every ``conf/test/*.yaml`` runs: a single test's file names a registered test (the same
name as the file) and holds every setting the test reads, and a suite lists registered tests,
each composed under its own name."""

import ast
import inspect
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


READERS = {"p", "params", "settings"}  # the names tests read their settings through
OWN_DEFAULT = {("sample", "sampler")}  # sample's sampler settings are its own top level


def keys_read(path: Path) -> set[str]:
    """Setting names a module reads: ``p.get("x", …)``, ``ctx.params.get("x")``, ``p["x"]``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target, args = node.func.value, node.args
            literal = args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)
            if node.func.attr == "get" and literal and _reader(target):
                found.add(args[0].value)
        key = getattr(node, "slice", None)
        literal = isinstance(key, ast.Constant) and isinstance(key.value, str)
        if isinstance(node, ast.Subscript) and literal and _reader(node.value):
            found.add(key.value)
    return found


def _reader(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name in READERS


def names_in(tree: object) -> set[str]:
    if not isinstance(tree, dict):
        return set()
    return set(tree) | set().union(*(names_in(v) for v in tree.values()))


@pytest.mark.parametrize("name", sorted(registry()))
def test_the_config_holds_every_setting_its_test_reads(name):
    """A setting read in code but missing from the YAML would run on a default no config
    shows; the test's module and the battery modules of its base classes are read."""
    test = registry()[name].__self__
    modules = {
        Path(inspect.getsourcefile(c))
        for c in type(test).__mro__
        if c.__module__.startswith("tabmem.battery.") and c.__module__ != "tabmem.battery.lifecycle"
    }
    config = OmegaConf.to_container(compose_config([f"test={name}"]).test, resolve=True)
    read = set().union(*(keys_read(m) for m in modules))
    missing = {k for k in read - names_in(config) if (name, k) not in OWN_DEFAULT}
    assert not missing, f"conf/test/{name}.yaml lacks {sorted(missing)}"
