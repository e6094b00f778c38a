"""What every test receives, and the registry of tests by ``test=`` name."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tabmem.data import Dataset
from tabmem.errors import ConfigError
from tabmem.llm.client import LanguageModel
from tabmem.results import TestResult


@dataclass
class TestContext:
    """One grid cell's inputs: the (transformed) dataset, the model, the test's settings.

    ``model`` is None when a test scores answers recorded elsewhere (``tabmem.rescore``).
    """

    __test__ = False  # not a pytest class

    dataset: Dataset
    model: LanguageModel | None
    params: Mapping[str, Any]
    seed: int

    @property
    def prompt_form(self) -> str:
        """How the model is asked ("chat", "completion"), or "transcript" without a model."""
        return self.model.prompt_form if self.model is not None else "transcript"

    def tokenize(self, text: str) -> list[str] | None:
        """The model's tokens of ``text``, or None without a model or tokenizer."""
        return self.model.tokenize(text) if self.model is not None else None


TestFunction = Callable[[TestContext], TestResult]
_REGISTRY: dict[str, TestFunction] = {}


def register(name: str) -> Callable[[TestFunction], TestFunction]:
    """Decorator: make a test function runnable as ``test=<name>``."""

    def add(function: TestFunction) -> TestFunction:
        _REGISTRY[name] = function
        return function

    return add


def registry() -> dict[str, TestFunction]:
    """Every runnable test, by name; importing each module of the package registers it."""
    import tabmem.battery as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    return dict(_REGISTRY)


def get_test(name: str) -> TestFunction:
    tests = registry()
    if name not in tests:
        raise ConfigError(f"Unknown test '{name}'; choose one of: {', '.join(sorted(tests))}.")
    return tests[name]
