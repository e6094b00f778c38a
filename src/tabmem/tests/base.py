"""What every test receives, and the registry of tests by ``test=`` name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tabmem.data import Dataset
from tabmem.errors import ConfigError
from tabmem.llm.client import LanguageModel
from tabmem.results import TestResult


@dataclass
class TestContext:
    """One grid cell's inputs: the (transformed) dataset, the model, the test's settings."""

    __test__ = False  # not a pytest class

    dataset: Dataset
    model: LanguageModel
    params: Mapping[str, Any]
    seed: int


TestFunction = Callable[[TestContext], TestResult]


def registry() -> dict[str, TestFunction]:
    """Every runnable test, by the name its config gives."""
    from tabmem.tests.header import run_header_test

    return {"header": run_header_test}


def get_test(name: str) -> TestFunction:
    tests = registry()
    if name not in tests:
        raise ConfigError(f"Unknown test '{name}'; choose one of: {', '.join(sorted(tests))}.")
    return tests[name]
