"""Every oracle by the model name the server answers to, and the names of the adversary
panel's families at a spread (``oracle-moments-t0.25``). ``oracle-scorer`` also scores text
(``tabmem.llm.oracle.scorer``): in process only, the server answers it in text."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tabmem.data.dataset import Dataset
from tabmem.llm.oracle.copula_learner import CopulaOracle
from tabmem.llm.oracle.forest import ForestOracle
from tabmem.llm.oracle.learner import LearnerOracle
from tabmem.llm.oracle.models import MarginalOracle, MemorizerOracle, NullOracle, Oracle
from tabmem.llm.oracle.panel import BoostedOracle, MixtureOracle, MomentsOracle, PanelOracle
from tabmem.llm.oracle.scorer import ScorerOracle

ORACLES: Mapping[str, type[Oracle]] = {
    cls.model_name: cls
    for cls in (
        MemorizerOracle,
        MarginalOracle,
        NullOracle,
        LearnerOracle,
        CopulaOracle,
        ForestOracle,
        MomentsOracle,
        MixtureOracle,
        BoostedOracle,
        ScorerOracle,
    )
}
"""The oracle classes by the model name the server answers to."""
PANEL = tuple(name for name, cls in ORACLES.items() if issubclass(cls, PanelOracle))
"""The adversary panel's families (``tabmem.llm.oracle.panel``), which take a spread."""
_AT_SPREAD = re.compile(r"^(oracle-[a-z]+)-t([0-9]*\.?[0-9]+)$")


def at_spread(name: str, spread: float | None) -> str:
    """The model name of a panel family at ``spread``: its own name at spread 1 (or None),
    else ``<name>-t<spread>``."""
    if spread is None or spread == 1.0:
        return name
    if name not in PANEL:
        raise ValueError(f"{name} takes no spread; the panel's families are {', '.join(PANEL)}")
    return f"{name}-t{spread:g}"


def split_spread(model_id: str) -> tuple[str, float | None]:
    """A model name as its family and spread: ``oracle-moments-t0.25`` is ("oracle-moments",
    0.25); any other name is itself with no spread."""
    found = _AT_SPREAD.match(model_id)
    if found is None or found[1] not in PANEL:
        return model_id, None
    return found[1], float(found[2])


def spread_oracle(model_id: str, datasets: Sequence[Dataset]) -> Oracle | None:
    """The panel oracle a ``<name>-t<spread>`` model name stands for, or None."""
    name, spread = split_spread(model_id)
    if spread is None:
        return None
    cls = ORACLES[name]
    assert issubclass(cls, PanelOracle)
    return cls(datasets, spread=spread)
