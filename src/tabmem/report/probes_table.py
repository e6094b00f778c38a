"""The probes table (Silvestri et al. 2025): datasets × {real, like, obfuscated} × {completion,
existence} for one model, from the tracked ``test=completion_choice`` / ``test=existence`` runs.

Each cell holds the probe's accuracy (right answers over questions asked) and a mark for its
verdict; the chance rate is one over the number of options (0.20 with five). Reading across a
row compares the real data with its ``like`` variant (every column shuffled on its own: no real
record survives) and its ``obfuscated`` variant (names and categories replaced by tokens).
"""

from __future__ import annotations

import pandas as pd

from tabmem.report.writers import ReportTable

TRANSFORMS = {"original": "real", "like": "like", "obfuscated": "obfuscated"}
TESTS = {"completion_choice": "completion", "existence": "existence"}
MARKS = {"evidence": " ✓", "ambiguous": " ?", "no_evidence": "", "not_applicable": ""}


def probe_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The finished probe runs of ``runs`` (a frame from ``tabmem.tracking.runs.load_runs``)."""
    if runs.empty:
        return runs
    keep = runs["test"].isin(list(TESTS)) & runs["transform"].isin(list(TRANSFORMS))
    return runs[keep]


def column_label(transform: str, test: str) -> str:
    """The column of one transform and probe, e.g. ``real · completion``."""
    return f"{TRANSFORMS[transform]} · {TESTS[test]}"


def cell_text(run: pd.Series) -> str:
    """Accuracy with two decimals and the verdict's mark; ``n/a`` when not applicable."""
    verdict = str(run.get("verdict", ""))
    rate = run.get("metric.rate")
    if verdict == "not_applicable" or rate is None or pd.isna(rate):
        return "n/a"
    return f"{float(rate):.2f}{MARKS.get(verdict, '')}"


def _queries_note(runs: pd.DataFrame) -> str:
    counts = runs.get("metric.n_queries", pd.Series(dtype=float)).dropna().astype(int)
    if counts.empty:
        return ""
    low, high = counts.min(), counts.max()
    span = str(low) if low == high else f"{low}–{high}"
    return f"Questions per cell: {span}."


def probes_table(runs: pd.DataFrame, model: str) -> ReportTable:
    """Datasets (rows) × transform · probe (columns) for ``model``; empty cells were not run."""
    mine = probe_runs(runs)
    mine = mine[mine["model"] == model] if not mine.empty else mine
    columns = [column_label(t, p) for t in TRANSFORMS for p in TESTS]
    cells: dict[str, dict[str, str]] = {}
    for _, run in mine.iterrows():
        label = column_label(run["transform"], run["test"])
        cells.setdefault(str(run["dataset"]), {})[label] = cell_text(run)
    rows = [{"dataset": d, **{c: cells[d].get(c, "") for c in columns}} for d in sorted(cells)]
    frame = pd.DataFrame(rows, columns=["dataset", *columns])
    notes = [
        "Accuracy of the multiple-choice probes (chance: one in the number of options, 0.20 "
        "with five). ✓ evidence (one-sided binomial p < alpha against chance, and accuracy "
        "above it by min_effect or more); ? ambiguous; n/a not applicable; empty: not run.",
        _queries_note(mine),
    ]
    return ReportTable(
        name=f"probes-{model}",
        title=f"Completion and existence probes on real, like and obfuscated data: {model}",
        frame=frame,
        footnotes=[n for n in notes if n],
        run_ids=[str(r) for r in mine.get("run_id", pd.Series(dtype=str))],
    )


def probes_tables(runs: pd.DataFrame) -> list[ReportTable]:
    """One probes table per model that has probe runs, models in name order."""
    mine = probe_runs(runs)
    models = sorted(mine["model"].unique()) if not mine.empty else []
    return [probes_table(runs, str(m)) for m in models]
