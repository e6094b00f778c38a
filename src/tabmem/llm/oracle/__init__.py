"""Reference ("oracle") models with known answers, served over a real OpenAI-compatible API.

``OracleServer`` and ``load_available_datasets`` live in ``tabmem.llm.oracle.server`` and are
imported from there on first use, so ``python -m tabmem.llm.oracle.server`` runs cleanly.
"""

from typing import Any

from tabmem.llm.oracle.catalog import ORACLES
from tabmem.llm.oracle.copula_learner import CopulaOracle
from tabmem.llm.oracle.forest import ForestOracle
from tabmem.llm.oracle.learner import LearnerOracle
from tabmem.llm.oracle.models import (
    CHARS_PER_TOKEN,
    MarginalOracle,
    MemorizerOracle,
    NullOracle,
    Oracle,
    OracleAnswer,
    last_user_text,
    message_text,
    rng_for,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "ORACLES",
    "CopulaOracle",
    "ForestOracle",
    "LearnerOracle",
    "MarginalOracle",
    "MemorizerOracle",
    "NullOracle",
    "Oracle",
    "OracleAnswer",
    "OracleServer",
    "last_user_text",
    "load_available_datasets",
    "message_text",
    "rng_for",
]

_FROM_SERVER = {"OracleServer", "load_available_datasets"}


def __getattr__(name: str) -> Any:
    if name in _FROM_SERVER:
        from tabmem.llm.oracle import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
