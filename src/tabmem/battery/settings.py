"""A test's settings as a typed object, loaded from its ``conf/test/<name>.yaml``.

Each test declares the fields it reads, with their types and no defaults: the YAML is the one
place a default lives. Loading checks that the config holds every field and nothing else, and
that each value has the field's type, so a misspelt or missing setting fails before the test
asks anything, with the setting named.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Self

from omegaconf import DictConfig, OmegaConf

from tabmem.errors import ConfigError


@dataclass(frozen=True)
class TestSettings:
    """The settings every test has; a test subclasses it with the fields it reads."""

    __test__ = False  # not a pytest class

    name: str

    @classmethod
    def load(cls, values: Mapping[str, Any], where: str = "") -> Self:
        """The settings in ``values`` (a test's composed config), checked and typed; ``where``
        names the section for errors (``sampler`` inside a sampling test's config)."""
        if isinstance(values, DictConfig):
            values = OmegaConf.to_container(values, resolve=True)  # type: ignore[assignment]
        section = where or f"test={values.get('name', cls.__name__)}"
        hints = typing.get_type_hints(cls)
        known = [f.name for f in fields(cls)]
        missing = [k for k in known if k not in values]
        if missing:
            raise ConfigError(
                f"The config of {section} lacks the setting(s) {', '.join(missing)}; add them "
                "to its YAML file under conf/test/."
            )
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(
                f"{section} has no setting(s) {', '.join(unknown)}; its settings are: "
                f"{', '.join(known)}."
            )
        return cls(**{k: _typed(hints[k], values[k], f"{section}: {k}") for k in known})


def _typed(kind: Any, value: Any, where: str) -> Any:
    """``value`` as type ``kind``, or a ConfigError that names the setting."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _typed(inner, value, where)
    if isinstance(kind, type) and issubclass(kind, TestSettings):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where} must be a section of settings, not {value!r}.")
        return kind.load(value, where)
    if origin is list:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where} must be a list, not {value!r}.")
        return [_typed(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where} must be a mapping, not {value!r}.")
        return {str(k): _typed(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if kind is Any:
        return value
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind in (str, bool) and isinstance(value, kind):
        return value
    raise ConfigError(f"{where} must be {getattr(kind, '__name__', kind)}, not {value!r}.")
