"""Statistical baselines in the place of a model (``model=logistic-regression``, …).

A baseline is built like any model (``backend: baseline`` in ``conf/model/``), so it runs in
the same grid and is logged with the same tags. Its one capability is ``fit``: the learning
tests (``fewshot_predict``, ``statistical_learning``) send it ``FitRequest``s
(``LanguageModel.fit``) instead of prompts. It cannot write text: the runner rules the other
tests out, and a prompt sent to it anyway gets a failed query that says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from tabmem.errors import ConfigError, ProviderError
from tabmem.llm.base import FIT, BaseBackend, GenerationParams, Message
from tabmem.stats.classifiers import ESTIMATORS, Fitted, fit_predict


class BaselineBackend(BaseBackend):
    """A classifier fitted on tabular rows; ``chat`` and ``complete`` refuse with one sentence."""

    capabilities = frozenset({FIT})

    def __init__(self, name: str, estimator: str, options: Mapping[str, Any]) -> None:
        if estimator not in ESTIMATORS:
            raise ConfigError(
                f"Model '{name}' names estimator '{estimator}'; use one of {', '.join(ESTIMATORS)}."
            )
        self.name = name
        self.estimator = estimator
        self.options = dict(options)
        self.identity = {"provider": "baseline", "model": name, "estimator": estimator}

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], ctx: object = None) -> BaselineBackend:
        options = {k: v for k, v in cfg.items() if k not in {"name", "backend", "estimator"}}
        return cls(str(cfg["name"]), str(cfg.get("estimator", "")), options)

    @property
    def refusal(self) -> str:
        return (
            f"model '{self.name}' is a statistical baseline, not a language model: it fits "
            "rows and cannot answer a prompt"
        )

    def fit_predict(
        self,
        train: pd.DataFrame,
        labels: Sequence[str],
        test: pd.DataFrame,
        kinds: Mapping[str, str],
        seed: int,
    ) -> Fitted:
        """Fit on ``train`` (columns of the given kinds) and predict a label per test row."""
        return fit_predict(self.estimator, train, labels, test, kinds, seed, self.options)

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        raise ProviderError(self.refusal + ".")

    def complete(self, prompt: str, params: GenerationParams) -> str:
        raise ProviderError(self.refusal + ".")
