"""What the MLflow UI shows of a run before it is opened: its name and its description."""

from __future__ import annotations

from tabmem.cell import Cell

DEFAULT_TRANSFORM = "original"


def run_title(cell: Cell, verdict: str) -> str:
    """``verdict · model · dataset · test`` (and the transform unless it is the original): the
    list of runs shows each cell's verdict without a column added by hand, and first, since
    MLflow's runs table cuts long names at the end."""
    parts = [verdict, cell.model, cell.dataset, cell.test]
    if cell.transform != DEFAULT_TRANSFORM:
        parts.append(cell.transform)
    return " · ".join(parts)


def run_description(verdict: str, reason: str, figure: str = "") -> str:
    """One paragraph for the run's description: the verdict, its reason and the headline figure."""
    text = f"**{verdict}**: {reason.strip()}"
    if not text.endswith((".", "!", "?")):
        text += "."
    if figure:
        text += f" Hits: {figure}."
    return text
