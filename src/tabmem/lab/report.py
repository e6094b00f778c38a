"""The lab's answer: each test's true-positive rate by repetitions and its false-positive rate.

A cell counts as *detected* when its verdict is ``evidence``. True positives are planted
datasets on checkpoints that have read them (grouped by how often); false positives are
held-out datasets on any checkpoint. Planted datasets on the base model (read 0 times) are a
row of their own: they show whether the base model knew them before the lab planted them.
Every rate has an exact 95 % (Clopper-Pearson) interval; with a handful of datasets the
intervals are wide, and the table says so by showing them.

Beside the rates, the ground-truth table reads "learned this much, found by these tests":
each checkpoint × file's loss drop and rows written back (``tabmem.lab.ground_truth``) with
the tests whose verdict was ``evidence`` and the dataset verdict.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from math import ceil, isnan, nan
from pathlib import Path
from typing import Any

import pandas as pd

from tabmem.markdown import markdown_table
from tabmem.results import Verdict
from tabmem.stats.pvalues import clopper_pearson

GROUP_PLANTED = "planted"
GROUP_BEFORE = "planted, before fine-tuning"
GROUP_HELD_OUT = "held out"
CELL_COLUMNS = [
    "run_id",
    "model",
    "passes",
    "dataset",
    "test",
    "verdict",
    "n_hits",
    "n_queries",
    "p_value",
    "planted",
    "seen",
    "first_rows",
    "seed",
]
FINGERPRINT = "param.model.lab.fingerprint"
SEED = "param.seed"
"""A cell's seed: the lab asks each checkpoint × file at every seed of ``evaluation.seeds``,
so its runs are read with ``load_runs(..., distinct=[SEED])``."""


def lab_cells(runs: pd.DataFrame, setting: str, fingerprint: str | None = None) -> pd.DataFrame:
    """The lab's finished cells with their ground truth: planted count, times read, and the
    rows read where only a file's first rows were planted (``first_rows``; 0: the whole file).

    Only the cells of one version of the setting count (``fingerprint``; by default the one
    whose cell started last): a setting changed and run again logs into the same experiment,
    and its old checkpoints read the files a different number of times.
    """
    column = "param.model.lab.setting"
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=CELL_COLUMNS)
    mine = runs[(runs[column] == setting) & (runs["status"] == "FINISHED")]
    if FINGERPRINT in mine and not mine.empty:
        if fingerprint is None:
            fingerprint = mine.sort_values("start_time").iloc[-1][FINGERPRINT]
        mine = mine[mine[FINGERPRINT] == fingerprint]
    rows = []
    for _, run in mine.iterrows():
        planted = _int(run.get(f"param.model.lab.planted.{run['dataset']}"))
        rows.append(
            {
                "run_id": run.get("run_id", ""),
                "model": run["model"],
                "passes": _int(run["param.model.lab.passes"]),
                "dataset": run["dataset"],
                "test": run["test"],
                "verdict": run["verdict"],
                "n_hits": run.get("metric.n_hits"),
                "n_queries": run.get("metric.n_queries"),
                "p_value": run.get("metric.p_value"),  # a dataset verdict's: the combined one
                "planted": planted,
                "seen": _int(run.get(f"param.model.lab.seen.{run['dataset']}")),
                "first_rows": _int(run.get(f"param.model.lab.first_rows.{run['dataset']}")),
                "seed": _int(run.get(SEED)),
            }
        )
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


def _int(value: Any) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def _group(cells: pd.DataFrame) -> pd.Series:
    planted = cells["planted"] > 0
    return pd.Series(
        [
            GROUP_HELD_OUT if not p else GROUP_PLANTED if s > 0 else GROUP_BEFORE
            for p, s in zip(planted, cells["seen"], strict=True)
        ],
        index=cells.index,
    )


def rate_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per test × group (× times read, for planted): cells, detected, rate, 95 % CI.

    A rate counts the cells where the test applies; ``not_applicable`` cells (a file in an
    order the data show, no log-probabilities) are counted apart, never as misses."""
    columns = [
        "test",
        "group",
        "repetitions",
        "cells",
        "detected",
        "ambiguous",
        "not_applicable",
        "rate",
        "ci_low",
        "ci_high",
        "datasets",
    ]
    if cells.empty:
        return pd.DataFrame(columns=columns)
    cells = cells.assign(group=_group(cells))
    cells["repetitions"] = cells["seen"].where(cells["group"] == GROUP_PLANTED, 0)
    rows = []
    keys = ["test", "group", "repetitions"]
    for (test, group, reps), cases in cells.groupby(keys, sort=True):
        part = cases[cases["verdict"] != Verdict.NOT_APPLICABLE]
        detected = int((part["verdict"] == "evidence").sum())
        low, high = clopper_pearson(detected, len(part)) if len(part) else (nan, nan)
        rows.append(
            {
                "test": test,
                "group": group,
                "repetitions": int(reps),
                "cells": len(part),
                "detected": detected,
                "ambiguous": int((part["verdict"] == "ambiguous").sum()),
                "not_applicable": len(cases) - len(part),
                "rate": detected / len(part) if len(part) else nan,
                "ci_low": low,
                "ci_high": high,
                "datasets": _datasets(cases),
            }
        )
    order = {GROUP_PLANTED: 0, GROUP_BEFORE: 1, GROUP_HELD_OUT: 2}
    rows.sort(key=lambda r: (r["test"], order[r["group"]], r["repetitions"]))
    return pd.DataFrame(rows, columns=columns)


def _datasets(cells: pd.DataFrame) -> str:
    """The cells' datasets, each planted by its first rows only named with their count."""
    names = {
        f"{d} (first {n} rows)" if n else d
        for d, n in zip(cells["dataset"], cells["first_rows"], strict=True)
    }
    return ", ".join(sorted(names))


def rate_markdown(table: pd.DataFrame) -> str:
    """The rate table as Markdown: TPR rows (planted) and FPR rows (held out)."""
    header = [
        "test",
        "group",
        "repetitions",
        "detected / cells",
        "rate",
        "95 % CI",
        "not applicable",
        "datasets",
    ]
    rows = []
    for _, r in table.iterrows():
        kind = (
            "TPR"
            if r["group"] == GROUP_PLANTED
            else "FPR"
            if r["group"] == GROUP_HELD_OUT
            else "base"
        )
        rate, ci = "-", "-"
        if r["cells"]:
            rate, ci = f"{kind} {r['rate']:.2f}", f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
        rows.append(
            [
                r["test"],
                r["group"],
                r["repetitions"],
                f"{r['detected']} / {r['cells']}",
                rate,
                ci,
                r["not_applicable"],
                r["datasets"],
            ]
        )
    return markdown_table(header, rows) + "\n"


def ground_truth_view(truth: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """The ground truth with, for each checkpoint × file, the tests that found it
    (``found_by``: verdict ``evidence``; "test (k/n)" where it was asked at n seeds and found
    at k) and its dataset verdict (test ``dataset``; one per seed, in seed order, joined by
    " / ")."""
    found, verdicts = [], []
    for _, row in truth.iterrows():
        mine = cells[(cells["passes"] == row["passes"]) & (cells["dataset"] == row["dataset"])]
        mine = mine.sort_values("seed")
        tests = mine[mine["test"] != "dataset"]
        named = []
        for test, asked in tests.groupby("test", sort=True):
            hits = int((asked["verdict"] == "evidence").sum())
            if hits:
                named.append(test if len(asked) == 1 else f"{test} ({hits}/{len(asked)})")
        found.append(", ".join(named))
        verdicts.append(" / ".join(mine.loc[mine["test"] == "dataset", "verdict"].astype(str)))
    return truth.assign(found_by=found, dataset_verdict=verdicts)


def _nats(value: float, spec: str) -> str:
    """A loss for the table; '-' where there is none (a file read whole has no unread rows)."""
    return "-" if isnan(value) else format(value, spec)


def ground_truth_markdown(view: pd.DataFrame) -> str:
    """The ground-truth view as Markdown: planted files first, deepest checkpoint first."""
    header = [
        "checkpoint",
        "dataset",
        "group",
        "times read",
        "loss",
        "base loss",
        "loss drop",
        "twin's loss drop",
        "learned over twin",
        "learned over unread",
        "rows written back",
        "found by",
        "dataset verdict",
    ]
    order = view.assign(_held=view["group"] != GROUP_PLANTED)
    order = order.sort_values(["_held", "dataset", "passes"], ascending=[True, True, False])
    rows = []
    for _, r in order.iterrows():
        name = f"{r['dataset']} (first {r['first_rows']} rows)" if r["first_rows"] else r["dataset"]
        written = (
            f"{round(r['rows_written_back'] * r['rows_n'])} / {r['rows_n']}" if r["rows_n"] else "-"
        )
        rows.append(
            [
                f"after {r['passes']} passes",
                name,
                r["group"],
                r["repetitions"],
                f"{r['loss']:.3f}",
                f"{r['base_loss']:.3f}",
                f"{r['loss_drop']:+.3f}",
                _nats(r["twin_loss_drop"], "+.3f"),
                _nats(r["learned_over_twin"], "+.3f"),
                _nats(r["learned_over_unread"], "+.3f"),
                written,
                r["found_by"] or "-",
                r["dataset_verdict"] or "-",
            ]
        )
    return markdown_table(header, rows) + "\n"


EXPOSURE_COLUMNS = [
    "test",
    "smallest_exposure",
    "found_by_times_read",
    "false_positives",
    "negatives",
    "fpr_high",
]
MAX_FPR = 0.01
"""The false-positive rate an exposure is reported at."""


def rows_learned(truth: pd.DataFrame) -> pd.Series:
    """Whether each checkpoint × file learned the rows it read, by (passes, dataset): its loss
    fell more than its unread rows' (the same file's rows never read; a part's never-read
    siblings) where it has them, else more than its twin's. The unread rows come first: a
    model that learned the file's distribution from other rows beats the twin on rows it never
    read (``tabmem.lab.ground_truth``)."""
    control = truth["learned_over_unread"].where(
        truth["learned_over_unread"].notna(), truth["learned_over_twin"]
    )
    return (control > 0).set_axis(pd.MultiIndex.from_frame(truth[["passes", "dataset"]]))


def exposure_table(cells: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Per test (and the dataset verdict): the smallest times read from which every file that
    learned its rows (``rows_learned``) was found, and the
    false positives on the negatives (the base model, never-read files) with the upper end of
    their 95 % interval. No exposure is named where none was found or the negatives' observed
    rate is above ``MAX_FPR``; with a few dozen negatives the bound stays far above it, and
    the table shows it rather than the claim."""
    if cells.empty:
        return pd.DataFrame(columns=EXPOSURE_COLUMNS)
    learned = rows_learned(truth)
    cells = cells.assign(group=_group(cells))
    cells = cells[cells["verdict"] != Verdict.NOT_APPLICABLE]
    rows = []
    for test, mine in cells.groupby("test", sort=True):
        negatives = mine[mine["group"] != GROUP_PLANTED]
        wrong = int((negatives["verdict"] == "evidence").sum())
        positives = mine[mine["group"] == GROUP_PLANTED]
        keys = list(zip(positives["passes"], positives["dataset"], strict=True))
        positives = positives[[bool(learned.get(k, False)) for k in keys]]
        levels = {
            int(r): (int((part["verdict"] == "evidence").sum()), len(part))
            for r, part in positives.groupby("seen")
        }
        smallest = nan
        for r in sorted(levels, reverse=True):
            found, n = levels[r]
            if found < n:
                break
            smallest = r
        if negatives.empty or wrong / len(negatives) > MAX_FPR:
            smallest = nan
        rows.append(
            {
                "test": test,
                "smallest_exposure": smallest,
                "found_by_times_read": "; ".join(
                    f"{r}: {found}/{n} {_interval(found, n)}"
                    for r, (found, n) in sorted(levels.items())
                ),
                "false_positives": wrong,
                "negatives": len(negatives),
                "fpr_high": clopper_pearson(wrong, len(negatives))[1] if len(negatives) else nan,
            }
        )
    rows.sort(key=lambda r: (r["test"] != "dataset", r["test"]))
    return pd.DataFrame(rows, columns=EXPOSURE_COLUMNS)


def _interval(found: int, n: int) -> str:
    low, high = clopper_pearson(found, n)
    return f"[{low:.2f}, {high:.2f}]"


def exposure_markdown(table: pd.DataFrame) -> str:
    """The exposure table as Markdown."""
    header = [
        "test",
        "smallest times read found",
        "files found / files that learned their rows, by times read (95 % CI)",
        "false positives / negatives",
        "FPR 95 % upper bound",
    ]
    rows = []
    for _, r in table.iterrows():
        smallest = "-" if isnan(r["smallest_exposure"]) else str(int(r["smallest_exposure"]))
        bound = "-" if isnan(r["fpr_high"]) else f"{r['fpr_high']:.2f}"
        rows.append(
            [
                r["test"],
                smallest,
                r["found_by_times_read"] or "-",
                f"{r['false_positives']} / {r['negatives']}",
                bound,
            ]
        )
    return markdown_table(header, rows) + "\n"


def rate_figure(table: pd.DataFrame) -> Any:
    """One panel per test (the dataset verdict first): TPR against the times a planted file
    was read, with 95 % CIs, and the held-out files' FPR as a dashed line. A legend of a dozen
    tests over one axis hid the curves; small multiples keep each readable."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tests = sorted(set(table["test"]), key=lambda t: (t != "dataset", t))
    columns = min(4, max(1, len(tests)))
    rows = max(1, ceil(len(tests) / columns))
    figure, axes = plt.subplots(
        rows, columns, figsize=(2.6 * columns, 2.1 * rows), sharex=True, sharey=True, squeeze=False
    )
    for axis, test in zip(axes.flat, tests, strict=False):
        part = table[table["test"] == test]
        planted = part[(part["group"] == GROUP_PLANTED) & (part["cells"] > 0)]
        planted = planted.sort_values("repetitions")
        if not planted.empty:
            errors = [planted["rate"] - planted["ci_low"], planted["ci_high"] - planted["rate"]]
            axis.errorbar(
                planted["repetitions"], planted["rate"], yerr=errors, marker="o", capsize=3
            )
        held = part[(part["group"] == GROUP_HELD_OUT) & (part["cells"] > 0)]
        if not held.empty:
            axis.axhline(float(held["rate"].iloc[0]), linestyle="--", color="tab:red")
        axis.set_title("dataset verdict" if test == "dataset" else test, fontsize=9)
        axis.set_xscale("symlog", linthresh=1)
        axis.set_ylim(-0.05, 1.05)
        axis.grid(alpha=0.3)
    repetitions = sorted(set(table.loc[table["group"] == GROUP_PLANTED, "repetitions"]))
    if repetitions:
        axes.flat[0].set_xticks(repetitions, [str(int(r)) for r in repetitions])
    for axis in list(axes.flat)[len(tests) :]:
        axis.set_visible(False)
    figure.supxlabel("times the planted file was read in fine-tuning", fontsize=9)
    figure.supylabel("share of cells with 'evidence'", fontsize=9)
    figure.suptitle("TPR (points, 95 % CI) and held-out FPR (dashed)", fontsize=10)
    figure.tight_layout()
    return figure


def timings_markdown(seconds: Mapping[str, float], cells: int) -> str:
    """How long each phase of a lab run took, on what machine: the timings the docs link."""
    rows = [(phase.replace("_", " "), f"{value:,.0f}") for phase, value in seconds.items()]
    return (
        f"Wall-clock seconds of `tabmem lab` on a machine with {os.cpu_count()} CPU cores "
        f"({cells} cells evaluated; training reads 0 where the setting's checkpoints were "
        f"reused).\n\n{markdown_table(['phase', 'seconds'], rows)}\n"
    )


def write_report(
    table: pd.DataFrame,
    cells: pd.DataFrame,
    folder: Path,
    truth: pd.DataFrame,
    seconds: Mapping[str, float],
) -> dict[str, Path]:
    """Rate table (Markdown, CSV), every cell (CSV), the ground-truth view from
    ``ground_truth_view`` (CSV, Markdown), the exposure table (Markdown, CSV), the figure
    (PNG) and the phases' ``seconds`` (Markdown) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "table_md": folder / "tpr_fpr.md",
        "table_csv": folder / "tpr_fpr.csv",
        "cells_csv": folder / "cells.csv",
        "ground_truth_csv": folder / "ground_truth.csv",
        "ground_truth_md": folder / "ground_truth.md",
        "figure": folder / "tpr_by_repetitions.png",
        "exposure_md": folder / "exposure.md",
        "exposure_csv": folder / "exposure.csv",
        "timings_md": folder / "timings.md",
    }
    paths["table_md"].write_text(rate_markdown(table))
    table.to_csv(paths["table_csv"], index=False)
    cells.to_csv(paths["cells_csv"], index=False)
    truth.to_csv(paths["ground_truth_csv"], index=False)
    paths["ground_truth_md"].write_text(ground_truth_markdown(truth))
    exposure = exposure_table(cells, truth)
    paths["exposure_md"].write_text(exposure_markdown(exposure))
    exposure.to_csv(paths["exposure_csv"], index=False)
    paths["timings_md"].write_text(timings_markdown(seconds, len(cells)))
    figure = rate_figure(table)
    figure.savefig(paths["figure"], dpi=120)
    import matplotlib.pyplot as plt

    plt.close(figure)
    return paths
