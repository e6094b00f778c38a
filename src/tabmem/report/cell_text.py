"""How the paper tables write a run's numbers and verdicts as cell text."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

MARKS = {"evidence": "✓", "no_evidence": "✗", "ambiguous": "?", "not_applicable": "-"}
"""One mark per verdict: evidence, no evidence, ambiguous, not applicable."""

NOT_APPLICABLE = "n/a"


def number(run: pd.Series, name: str) -> float | None:
    """A logged metric of the run, or None when it was not logged."""
    value = run.get(f"metric.{name}")
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def mark(run: pd.Series) -> str:
    """The verdict of a run as one mark."""
    return MARKS.get(str(run.get("verdict", "")), "?")


def applicable(run: pd.Series) -> bool:
    return str(run.get("verdict", "")) != "not_applicable"


def hits(run: pd.Series) -> str:
    """``k/n`` of the run's hits and queries, ``n/a`` when the test did not apply."""
    if not applicable(run):
        return NOT_APPLICABLE
    return f"{_int(number(run, 'n_hits'))}/{_int(number(run, 'n_queries'))}"


def fraction(value: float | None, digits: int = 2) -> str:
    """A rate in [0, 1] with ``digits`` decimals; ``?`` when it was not logged."""
    return "?" if value is None else f"{value:.{digits}f}"


def with_error(value: float | None, error: float | None, digits: int = 2) -> str:
    """``value ± error`` (the error omitted when it was not logged)."""
    if value is None:
        return "?"
    text = f"{value:.{digits}f}"
    return text if error is None else f"{text} ± {error:.{digits}f}"


def percent(value: float | None) -> str:
    return "?" if value is None else f"{100 * value:.0f}%"


def tag(run: pd.Series, key: str) -> str:
    """A run's tag (``info.<key>`` or a cell tag) as text, '' when absent."""
    value: Any = run.get(key, "")
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _int(value: float | None) -> str:
    return "?" if value is None else str(round(value))


def source(row: str, column: str, model: str, run: pd.Series, value: str) -> dict[str, str]:
    """Where one cell's text came from: its row and column, the model and the run id."""
    return {
        "row": row,
        "column": column,
        "model": model,
        "run_id": str(run["run_id"]),
        "value": value,
        "verdict": str(run.get("verdict", "")),
    }


def reason_notes(reasons: dict[tuple[str, str], str]) -> list[str]:
    """One footnote per not-applicable (row, test): why the test could not run there."""
    return [
        f"{NOT_APPLICABLE} ({row}, {test.replace('_', ' ')}): {reason}"
        for (row, test), reason in sorted(reasons.items())
    ]
