"""What every test receives, and the registry of tests by ``test=`` name."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tabmem.data import Dataset
from tabmem.errors import ConfigError
from tabmem.llm.base import FIT, GENERATE, LOGPROBS, GenerationParams
from tabmem.llm.client import LanguageModel
from tabmem.llm.logprobs import no_logprobs_reason
from tabmem.results import TestResult


@dataclass
class TestContext:
    """One grid cell's inputs: the (transformed) dataset, the model, the test's settings.

    ``params`` is the test's config as composed; a test loads it into its typed settings
    (``tabmem.battery.settings``) before its first step, and its steps read those.
    ``model`` is None when a test scores answers recorded elsewhere (``tabmem.rescore``).
    """

    __test__ = False  # not a pytest class

    dataset: Dataset
    model: LanguageModel | None
    params: Any
    seed: int

    @property
    def prompt_form(self) -> str:
        """How the model is asked ("chat", "completion"), or "transcript" without a model."""
        return self.model.prompt_form if self.model is not None else "transcript"

    def tokenize(self, text: str) -> list[str] | None:
        """The model's tokens of ``text``, or None without a model or tokenizer."""
        return self.model.tokenize(text) if self.model is not None else None

    def greedy_answer(self, max_tokens: int) -> GenerationParams:
        """The parameters of one greedy answer: a chat reply ends by itself, a plain completion
        at the end of its line."""
        stop = () if self.prompt_form == "chat" else ("\n",)
        return GenerationParams(max_tokens=max_tokens, temperature=0.0, stop=stop, seed=self.seed)

    def model_for(self, step: str) -> LanguageModel:
        """The model, which ``step`` ("Wording", "Asking") of a test's requests needs: recorded
        answers are rescored without one, and never worded or asked."""
        if self.model is None:
            raise ConfigError(f"{step} a test's requests needs a model.")
        return self.model


TestFunction = Callable[[TestContext], TestResult]
_REGISTRY: dict[str, TestFunction] = {}
_NEEDS: dict[str, frozenset[str]] = {}
_CLAIMS: dict[str, str] = {}
_READS_DATASET: dict[str, bool] = {}
_TABLE_ORDER: dict[str, int] = {}
UNORDERED = 1_000
"""The table position of a test that declares none: after the papers' tests, by name."""
WRITES_TEXT = frozenset({GENERATE})
CLAIMS = ("rows_seen", "knowledge", "learning", "forecast")
"""What a test's ``evidence`` claims: the model has seen the file's rows; it knows the file's
names, values or distribution; it learns from examples in the prompt; it knows a series past a
date. Calibration and the reports group tests by their claim."""


def register(
    name: str,
    needs: frozenset[str] = WRITES_TEXT,
    claims: str = "",
    reads_dataset: bool = True,
    table_order: int = UNORDERED,
) -> Callable[[TestFunction], TestFunction]:
    """Decorator: make a test function runnable as ``test=<name>``. ``needs`` names the model
    capabilities (``tabmem.llm.base``) of which the test can use any one; ``claims`` one of
    ``CLAIMS``; ``reads_dataset`` is false for a test that ignores its cell's dataset;
    ``table_order`` is where the tables list it (``claiming_in_order``)."""
    if claims not in CLAIMS:
        raise ValueError(f"test '{name}' claims '{claims}'; a test claims one of {CLAIMS}")

    def add(function: TestFunction) -> TestFunction:
        _REGISTRY[name] = function
        _NEEDS[name] = needs
        _CLAIMS[name] = claims
        _READS_DATASET[name] = reads_dataset
        _TABLE_ORDER[name] = table_order
        return function

    return add


def claiming(claim: str) -> list[str]:
    """The registered tests whose ``evidence`` makes ``claim``, by name."""
    registry()
    return sorted(name for name, made in _CLAIMS.items() if made == claim)


def claiming_in_order(*claims: str) -> list[str]:
    """The tests whose ``evidence`` makes one of ``claims`` (``rows_seen``, ``knowledge``), in
    table order: each test's ``table_order`` (the papers' order, declared on its class), then
    by claim and name."""
    found = [name for claim in claims for name in claiming(claim)]
    return sorted(found, key=lambda name: _TABLE_ORDER.get(name, UNORDERED))


def reading_datasets() -> list[str]:
    """The registered tests that read their cell's dataset, by name."""
    registry()
    return sorted(name for name, reads in _READS_DATASET.items() if reads)


def registry() -> dict[str, TestFunction]:
    """Every runnable test, by name; importing each module of the package registers it."""
    import tabmem.battery as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    return dict(_REGISTRY)


def _load(name: str) -> None:
    """Register test ``name`` by importing its own module (``battery/<name>.py``), and every
    module only when it has none: a cell imports one test, not all of them."""
    if name in _REGISTRY:
        return
    module = f"{__package__}.{name}"
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as missing:
        if missing.name != module:
            raise
    if name not in _REGISTRY:
        registry()


def get_test(name: str) -> TestFunction:
    _load(name)
    if name not in _REGISTRY:
        tests = sorted(registry())
        raise ConfigError(f"Unknown test '{name}'; choose one of: {', '.join(tests)}.")
    return _REGISTRY[name]


def needs_of(name: str) -> frozenset[str]:
    """The model capabilities test ``name`` can use (any one will do)."""
    _load(name)
    return _NEEDS.get(name, WRITES_TEXT)


def inapplicable_reason(name: str, model: LanguageModel) -> str:
    """Why test ``name`` cannot run with ``model`` (it has none of the capabilities the test
    can use), or "" when it can; the runner decides this once, before the test runs."""
    needs = needs_of(name)
    if needs & model.capabilities:
        return ""
    if LOGPROBS in needs:
        return no_logprobs_reason(model)
    users = " and ".join(f"test={t}" for t in sorted(_NEEDS) if model.capabilities & _NEEDS[t])
    if model.capabilities == {FIT}:
        return (
            f"model '{model.name}' is a statistical baseline, not a language model: only "
            f"{users} can use it"
        )
    return (
        f"model '{model.name}' can {' and '.join(sorted(model.capabilities)) or 'nothing'} but "
        f"not {' or '.join(sorted(needs))}: only {users or 'no test'} can use it"
    )


def run_test(name: str, ctx: TestContext) -> TestResult:
    """Run test ``name`` on a cell, or say why it does not apply to the cell's model."""
    test = get_test(name)
    reason = inapplicable_reason(name, ctx.model) if ctx.model is not None else ""
    if not reason and ctx.model is not None and _READS_DATASET.get(name, True):
        reason = ctx.model.unknown_data_reason(ctx.dataset)
    result = TestResult.not_applicable(name, reason) if reason else test(ctx)
    if ctx.dataset.spec.delimiter_sniffed:
        result.info["delimiter"] = ctx.dataset.delimiter  # read from the header, not configured
    return result
