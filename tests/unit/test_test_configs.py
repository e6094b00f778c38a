"""Every ``conf/test/*.yaml`` runs: a single test's file names a registered test (the same
name as the file), and a suite lists registered tests, each composed under its own name."""

from pathlib import Path

import pytest
import yaml

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
