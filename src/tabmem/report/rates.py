"""Evidence rates over groups of calibration cells: counts, a Clopper-Pearson interval, the
cells behind them, and their text in the tables."""

from __future__ import annotations

import pandas as pd

from tabmem.stats.pvalues import clopper_pearson

EVIDENCE = "evidence"
NOT_APPLICABLE = "not_applicable"


def evidence_rate(cells: pd.DataFrame) -> dict[str, object]:
    """Evidence cells over applicable cells, its interval, and the cells with evidence."""
    applicable = cells[cells["verdict"] != NOT_APPLICABLE]
    hits = applicable[applicable["verdict"] == EVIDENCE]
    low, high = clopper_pearson(len(hits), len(applicable))
    rate = len(hits) / len(applicable) if len(applicable) else float("nan")
    named = [
        f"{r.model} × {r.dataset}" + (" (twin)" if r.transform == "twin" else "")
        for r in hits.itertuples()
    ]
    return {
        "evidence": len(hits),
        "applicable": len(applicable),
        "not_applicable": len(cells) - len(applicable),
        "rate": rate,
        "low": low,
        "high": high,
        "cells": "; ".join(sorted(named)),
    }


def share_text(rate: dict[str, object]) -> str:
    if not rate["applicable"]:
        return "-"
    return f"{rate['evidence']}/{rate['applicable']} = {rate['rate']:.2f}"


def interval_text(rate: dict[str, object]) -> str:
    if not rate["applicable"]:
        return "-"
    return f"[{rate['low']:.2f}, {rate['high']:.2f}]"
