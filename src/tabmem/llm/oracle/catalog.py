"""Every oracle by the model name the server answers to."""

from __future__ import annotations

from collections.abc import Mapping

from tabmem.llm.oracle.copula_learner import CopulaOracle
from tabmem.llm.oracle.forest import ForestOracle
from tabmem.llm.oracle.learner import LearnerOracle
from tabmem.llm.oracle.models import MarginalOracle, MemorizerOracle, NullOracle, Oracle

ORACLES: Mapping[str, type[Oracle]] = {
    cls.model_name: cls
    for cls in (
        MemorizerOracle,
        MarginalOracle,
        NullOracle,
        LearnerOracle,
        CopulaOracle,
        ForestOracle,
    )
}
"""The oracle classes by the model name the server answers to."""
