"""The power of the tests of rows seen: how often each finds a model that knows part of a file.

The power grid (``conf/grid/power.yaml``) runs ``oracle-partial`` — a seeded share of each
file's rows known verbatim, the learner's answers to everything else — at several shares and
seeds on the six paper files, with the default query counts (suite ``calibration_rows``) and the
papers' counts (``calibration_papers``). Its cells have the role ``power``.

- The power table: per test and setting, the true-positive rate (evidence cells / applicable
  cells) at each share, beside the test's false-positive rate on every negative cell of the same
  store: a TPR read at the FPR measured with it, as the membership-inference literature reports.
- The smallest share found with ``POWER`` (80 %) power: per test, setting and file, the smallest
  share whose cells got ``evidence`` in at least 80 % of the seeds.
- The figure: TPR by share, one line per test, one panel per setting.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from tabmem.report.rates import evidence_rate, share_text
from tabmem.report.writers import ReportTable

POWER = 0.8
SETTINGS = {"calibration_rows": "default counts", "calibration_papers": "papers' counts"}
"""The power grid's suites and the query counts they stand for."""
PARTIAL = "oracle-partial"


def _partial(cells: pd.DataFrame) -> pd.DataFrame:
    """The power cells of the partial memorizer, with a known share, in a known setting."""
    mine = cells[(cells["role"] == "power") & (cells["model"] == PARTIAL)]
    return mine[mine["share"].notna() & mine["suite"].isin(list(SETTINGS))]


def _tests(cells: pd.DataFrame, order: list[str]) -> list[str]:
    present = set(cells["test"])
    return [t for t in order if t in present]


def power_frame(cells: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Per test and setting: the FPR on the negatives and the TPR at each share."""
    partial = _partial(cells)
    negatives = cells[cells["role"] == "negative"]
    shares = sorted(partial["share"].unique())
    rows = []
    for test in _tests(partial, order):
        fpr = share_text(evidence_rate(negatives[negatives["test"] == test]))
        for suite, setting in SETTINGS.items():
            mine = partial[(partial["test"] == test) & (partial["suite"] == suite)]
            if mine.empty:
                continue
            row = {"test": test, "queries": setting, "FPR": fpr}
            for share in shares:
                row[f"TPR at {share:g}"] = share_text(evidence_rate(mine[mine["share"] == share]))
            rows.append(row)
    return pd.DataFrame(rows)


def smallest_share_frame(cells: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Per test, setting and file: the smallest share found with ``POWER`` power."""
    partial = _partial(cells)
    datasets = sorted(partial["dataset"].unique())
    rows = []
    for test in _tests(partial, order):
        for suite, setting in SETTINGS.items():
            mine = partial[(partial["test"] == test) & (partial["suite"] == suite)]
            if mine.empty:
                continue
            row = {"test": test, "queries": setting}
            for dataset in datasets:
                row[dataset] = _smallest(mine[mine["dataset"] == dataset])
            rows.append(row)
    return pd.DataFrame(rows)


def _smallest(cells: pd.DataFrame) -> str:
    """The smallest share with power, "> largest" when none has it, "n/a" when none applies."""
    found = "n/a"
    for share in sorted(cells["share"].unique()):
        rate = evidence_rate(cells[cells["share"] == share])
        if not rate["applicable"]:
            continue
        if rate["rate"] >= POWER:
            return f"{share:g}"
        found = f"> {share:g}"
    return found


def power_tables(cells: pd.DataFrame, order: list[str]) -> list[ReportTable]:
    """The power table and the smallest shares found, or none without power cells."""
    partial = _partial(cells)
    if partial.empty:
        return []
    run_ids = sorted(partial["run_id"])
    seeds = partial["seed"].nunique()
    return [
        ReportTable(
            name="power",
            title="Power: true-positive rate by share of rows known (oracle-partial)",
            frame=power_frame(cells, order),
            footnotes=[
                f"TPR: evidence cells / applicable cells of oracle-partial knowing that share of "
                f"each file's rows ({seeds} seeds × the six paper files); FPR: evidence cells / "
                "applicable negative cells of the same store, so each TPR is read at the "
                "false-positive rate measured beside it. Default counts: each test's own "
                "n_queries; papers' counts: 250 queries where the file allows. Method: "
                "docs/calibration.md.",
            ],
            run_ids=run_ids,
        ),
        ReportTable(
            name="power_smallest_share",
            title=f"Power: the smallest share of rows found with {POWER:.0%} power",
            frame=smallest_share_frame(cells, order),
            footnotes=[
                f"The smallest share whose cells got evidence in at least {POWER:.0%} of the "
                "seeds; '> s': not even at the largest share s; n/a: the test does not apply.",
            ],
            run_ids=run_ids,
        ),
    ]


def power_figure(cells: pd.DataFrame, order: list[str]) -> Figure:
    """TPR by share of rows known, one line per test, one panel per setting."""
    partial = _partial(cells)
    settings = [s for s in SETTINGS if (partial["suite"] == s).any()]
    figure = Figure(figsize=(5.5 * max(1, len(settings)), 4.2), layout="constrained")
    axes = figure.subplots(1, max(1, len(settings)), squeeze=False)[0]
    for ax, suite in zip(axes, settings, strict=False):
        mine = partial[partial["suite"] == suite]
        for test in _tests(mine, order):
            points = []
            for share in sorted(mine["share"].unique()):
                rate = evidence_rate(mine[(mine["test"] == test) & (mine["share"] == share)])
                if rate["applicable"]:
                    points.append((share, rate["rate"]))
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=test)
        ax.axhline(POWER, color="grey", linestyle=":", linewidth=1)
        shares = sorted(mine["share"].unique())
        ax.set_xscale("log")
        ax.set_xticks(shares, [f"{share:g}" for share in shares])
        ax.minorticks_off()
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("share of each file's rows the model knows")
        ax.set_ylabel("TPR (evidence / applicable cells)")
        ax.set_title(f"TPR by share memorized, {SETTINGS[suite]}", loc="left")
        ax.legend(fontsize=8, loc="upper left")
    return figure
