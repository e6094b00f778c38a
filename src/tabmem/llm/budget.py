"""A spending cap shared by every cell of a grid: a small JSON ledger under a file lock.

Parallel cells run in separate processes, so the spend lives in one file
(``<grid folder>/spend.json``) that each answer adds its cost to under an inter-process lock.
Before each request a cell reads the ledger; once the spend has reached the budget no new
request is sent. Requests already in flight still land (and are cached and counted), so a
grid stops near the budget, past it by at most the cost of the answers in flight.
"""

from __future__ import annotations

import json
from pathlib import Path

from filelock import FileLock

from tabmem.errors import TabmemError


class BudgetReached(TabmemError):
    """The grid's budget is spent: the cell's remaining requests were not sent."""


class Budget:
    """``limit_usd`` for everything logged in ``ledger`` (created on first spend)."""

    def __init__(self, limit_usd: float, ledger: Path) -> None:
        self.limit_usd = float(limit_usd)
        self.ledger = Path(ledger)
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(self.ledger.with_suffix(".lock")), timeout=60)

    def spent(self) -> float:
        """USD spent so far by every cell sharing the ledger."""
        with self._lock:
            return self._read()

    def add(self, usd: float) -> float:
        """Add one answer's cost; the new total."""
        with self._lock:
            total = self._read() + usd
            self.ledger.write_text(json.dumps({"spent_usd": total}))
        return total

    def reached(self) -> str | None:
        """The sentence that stops a cell once the budget is spent, else None."""
        spent = self.spent()
        if spent < self.limit_usd:
            return None
        return f"budget of ${self.limit_usd:.4f} reached after ${spent:.4f}"

    def _read(self) -> float:
        if not self.ledger.exists():
            return 0.0
        return float(json.loads(self.ledger.read_text() or "{}").get("spent_usd", 0.0))
