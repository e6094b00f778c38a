"""A test's settings load from its config typed and checked, or fail naming the setting."""

from dataclasses import dataclass

import pytest
from omegaconf import OmegaConf

from tabmem.battery.settings import TestSettings
from tabmem.errors import ConfigError


@dataclass(frozen=True)
class Inner(TestSettings):
    n_samples: int
    max_tokens: int | None


@dataclass(frozen=True)
class Outer(TestSettings):
    alpha: float
    pool: list[str]
    styles: dict[str, str]
    strict: bool
    sampler: Inner


GOOD = {
    "name": "outer",
    "alpha": 1,
    "pool": ["iris"],
    "styles": {"original": "named"},
    "strict": True,
    "sampler": {"name": "inner", "n_samples": 5, "max_tokens": None},
}


def test_a_config_loads_typed_with_its_sections():
    settings = Outer.load(OmegaConf.create(GOOD))
    assert settings.alpha == 1.0 and isinstance(settings.alpha, float)
    assert settings.pool == ["iris"] and settings.styles == {"original": "named"}
    assert settings.sampler == Inner(name="inner", n_samples=5, max_tokens=None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"alpha": "small"}, r"test=outer: alpha must be float, not 'small'"),
        ({"strict": 1}, r"strict must be bool, not 1"),
        ({"pool": "iris"}, r"pool must be a list"),
        ({"pool": ["iris", 3]}, r"pool\[1\] must be str, not 3"),
        (
            {"sampler": {"name": "inner", "n_samples": 2.5, "max_tokens": 9}},
            r"n_samples must be int",
        ),
        ({"alpah": 0.01}, r"test=outer has no setting\(s\) alpah; its settings are: name, alpha"),
        (
            {"sampler": {"name": "inner", "n_samples": 5}},
            r"sampler lacks the setting\(s\) max_tokens",
        ),
    ],
)
def test_a_wrong_setting_fails_naming_it(change, message):
    with pytest.raises(ConfigError, match=message):
        Outer.load({**GOOD, **change})


def test_a_missing_setting_names_the_yaml_to_add_it_to():
    config = {k: v for k, v in GOOD.items() if k != "alpha"}
    with pytest.raises(ConfigError, match=r"config of test=outer lacks the setting\(s\) alpha"):
        Outer.load(config)
