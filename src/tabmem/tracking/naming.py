"""What the MLflow UI shows of a run before it is opened: its name and its description."""

from __future__ import annotations

from tabmem.cell import Cell

DEFAULT_TRANSFORM = "original"


def run_title(cell: Cell, verdict: str) -> str:
    """``model · dataset · test · verdict`` (the transform too, unless it is the original), so
    the list of runs shows each cell's verdict without opening it or adding a column."""
    parts = [cell.model, cell.dataset, cell.test]
    if cell.transform != DEFAULT_TRANSFORM:
        parts.append(cell.transform)
    return " · ".join([*parts, verdict])


def run_description(verdict: str, reason: str, figure: str = "") -> str:
    """One paragraph for the run's description: the verdict, its reason and the headline figure."""
    text = f"**{verdict}**: {reason.strip()}"
    if not text.endswith((".", "!", "?")):
        text += "."
    if figure:
        text += f" Hits: {figure}."
    return text
