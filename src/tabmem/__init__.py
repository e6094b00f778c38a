"""tabmem: tests large language models for knowledge and memorization of tabular datasets.

``tabmem.run`` and ``tabmem.grid`` run the CLI's cells from Python (docs/python-api.md); they
are imported on first use, so ``import tabmem`` stays cheap.
"""

import os
from typing import Any

# MLflow sends usage telemetry over the network unless told not to; the harness uses no
# network but the model provider a user configures. Set before any module imports mlflow.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

__version__ = "0.1.0"
__all__ = ["CellResult", "grid", "run"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tabmem import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
