"""The calibration cells as rates: dataset verdicts per cell group, the false-positive table
(``reference_fpr.md``) with its exact upper bounds, the power table (``reference_power.md``)
and its figure.

A *negative* cell is a model that knows no row of the file it is asked about (the oracles
that know no row on the real files, the memorizer on twins); a *power* cell is a partial
memorizer. Rates count applicable cells only: a test that says ``not_applicable`` made no
claim, right or wrong, and the tables say how many such cells there were.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import product
from pathlib import Path
from typing import Any

from scipy import stats

from tabmem.markdown import markdown_table
from tabmem.results import CellResult, Verdict
from tabmem.stats.combine import DatasetRule, decide_dataset
from tabmem.stats.pvalues import clopper_pearson

DATASET_VERDICT = "dataset verdict"
"""How the tables name the combined verdict of a cell's tests of rows seen."""
VERDICT_KEY = ("model", "rest", "share", "dataset", "transform", "seed", "setting")
"""The fields that name one model × dataset × transform × seed × setting: one dataset verdict."""
LEVEL = 0.95


def fpr_upper_bound(evidence: int, n: int, level: float = LEVEL) -> float:
    """The exact one-sided upper confidence bound of a rate of ``evidence`` in ``n`` cells
    (Clopper-Pearson); with none in ``n`` it is ``1 - (1 - level) ** (1 / n)``."""
    if n <= 0:
        return 1.0
    if evidence >= n:
        return 1.0
    return float(stats.beta.ppf(level, evidence + 1, n - evidence))


def fraction(k: int, n: int) -> str:
    """``k/n = rate`` as the tables write a count."""
    return f"{k}/{n} = {k / n:.3f}" if n else f"{k}/0"


def role(row: Mapping[str, Any]) -> str:
    """``power`` for a partial memorizer's cell, ``negative`` for every other reference cell."""
    return "power" if row["model"] == "oracle-partial" else "negative"


def dataset_verdicts(
    rows: Iterable[Mapping[str, Any]],
    rule: DatasetRule | None = None,
    members: Collection[str] | None = None,
    label: str = DATASET_VERDICT,
) -> list[dict[str, Any]]:
    """One row per model × dataset × transform × seed × setting (and share and rest): the
    dataset verdict (``tabmem.stats.combine.decide_dataset``) over that cell's tests, or over
    its tests among ``members`` (a suite's), named ``label`` in the rows' ``test``.

    A group that lacks a test applicable elsewhere at its setting is left out: recorded runs
    of a few tests (``--tests``) tabulated beside whole runs would otherwise give verdicts of
    those few tests alone, which is not the product's dataset verdict."""
    groups: dict[tuple[Any, ...], list[CellResult]] = defaultdict(list)
    required: dict[Any, set[str]] = defaultdict(set)  # per setting, the tests that applied
    for row in rows:
        if members is not None and row["test"] not in members:
            continue
        p = row["p_value"]
        groups[tuple(row[k] for k in VERDICT_KEY)].append(
            CellResult(
                model=str(row["model"]),
                dataset=str(row["dataset"]),
                test=str(row["test"]),
                transform=str(row["transform"]),
                status="finished",
                verdict=row["verdict"],
                p_value=None if p in ("", None) else float(p),
            )
        )
        if row["verdict"] != Verdict.NOT_APPLICABLE:
            required[row["setting"]].add(str(row["test"]))
    setting = VERDICT_KEY.index("setting")
    out = []
    for key, outcomes in groups.items():
        if not required[key[setting]] <= {o.test for o in outcomes}:
            continue
        decided = decide_dataset(outcomes, rule or DatasetRule())
        out.append(
            {
                **dict(zip(VERDICT_KEY, key, strict=True)),
                "test": label,
                "verdict": str(decided.verdict),
                "p_value": decided.p_value,
                "tests": len(outcomes),
                "combined": len(decided.combined),
                "carried_by": " ".join(decided.carried_by),
            }
        )
    return out


def _count(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    verdicts = [str(r["verdict"]) for r in rows]
    applicable = [v for v in verdicts if v != Verdict.NOT_APPLICABLE]
    return {
        "cells": len(verdicts),
        "applicable": len(applicable),
        "evidence": applicable.count(Verdict.EVIDENCE),
        "ambiguous": applicable.count(Verdict.AMBIGUOUS),
    }


GROUP_KEY = ("model", "dataset", "transform")
"""What one independent unit of the negatives is: a model on a file (or its twins). Cells of
one model on one file at several seeds share the model's knowledge of the file, so a model
that beats a test's null there tends to beat it at every seed: the seeds are not independent
draws, and only the groups are."""


def _groups(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Applicable model × file groups, and those with at least one ``evidence`` cell."""
    applicable: set[tuple[Any, ...]] = set()
    found: set[tuple[Any, ...]] = set()
    for r in rows:
        if str(r["verdict"]) != Verdict.NOT_APPLICABLE:
            key = tuple(r[k] for k in GROUP_KEY)
            applicable.add(key)
            if str(r["verdict"]) == Verdict.EVIDENCE:
                found.add(key)
    return {"groups": len(applicable), "groups_evidence": len(found)}


def fpr_rows(
    cells: Sequence[Mapping[str, Any]], verdicts: Sequence[Mapping[str, Any]], tests: Sequence[str]
) -> list[dict[str, Any]]:
    """Per setting, per test of rows seen and for the dataset verdict: the negative cells, how
    many were applicable, ``evidence`` and ``ambiguous`` among them, and the FPR's bound."""
    out = []
    settings = sorted({str(r["setting"]) for r in cells})
    by: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in [*cells, *verdicts]:
        if role(row) == "negative":
            by[(str(row["setting"]), str(row["test"]))].append(row)
    for setting in settings:
        for test in [*tests, DATASET_VERDICT]:
            counted = _count(by[(setting, test)])
            if not counted["cells"]:
                continue
            groups = _groups(by[(setting, test)])
            out.append(
                {
                    "setting": setting,
                    "test": test,
                    **counted,
                    "fpr_upper_95": fpr_upper_bound(counted["evidence"], counted["applicable"]),
                    **groups,
                    "group_upper_95": fpr_upper_bound(groups["groups_evidence"], groups["groups"]),
                }
            )
    return out


def breakdown_markdown(
    cells: Sequence[Mapping[str, Any]],
    verdicts: Sequence[Mapping[str, Any]],
    tests: Sequence[str],
    by: str,
    notes: Mapping[str, str] | None = None,
) -> str:
    """The negatives' ``evidence`` among applicable cells per setting, with one row per
    ``by`` (``model``: each negative family, twins as the memorizer on twins; ``dataset``:
    each file) and a column per test and per dataset verdict; ``notes`` adds a last column
    (which baseline a family shares a model with)."""
    rows = [r for r in [*cells, *verdicts] if role(r) == "negative"]
    columns = [*tests, *sorted({str(v["test"]) for v in verdicts}, key=_verdict_order)]
    parts = []
    for setting in sorted({str(r["setting"]) for r in rows}):
        tally: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
        for r in rows:
            if str(r["setting"]) == setting:
                tally[(_breakdown_label(r, by), str(r["test"]))].append(r)
        body = []
        for label in sorted({label for label, _ in tally}):
            cells_ = []
            for test in columns:
                counted = _count(tally.get((label, test), []))
                cells_.append(f"{counted['evidence']}/{counted['applicable']}")
            if notes is not None:
                cells_.append(notes.get(label.split(" ")[0], ""))
            body.append([label, *cells_])
        header = [by if by != "model" else "negative", *columns]
        if notes is not None:
            header.append("shares a model with a baseline")
        parts.append(f"### setting: {setting}\n\n" + markdown_table(header, body))
    return "\n\n".join(parts)


def _breakdown_label(row: Mapping[str, Any], by: str) -> str:
    if by == "model" and row["transform"] == "twin":
        return f"{row['model']} on twins"
    return str(row[by])


def _verdict_order(label: str) -> tuple[int, str]:
    """The product's dataset verdict first, then the suites' variants."""
    return (label != DATASET_VERDICT, label)


def power_rows(
    cells: Sequence[Mapping[str, Any]], verdicts: Sequence[Mapping[str, Any]], tests: Sequence[str]
) -> list[dict[str, Any]]:
    """Per rest, setting, test (and the dataset verdict) and share: the partial memorizer's
    ``evidence`` among applicable cells, the rate and its Clopper-Pearson 95 % interval."""
    by: dict[tuple[str, str, str, float], list[Mapping[str, Any]]] = defaultdict(list)
    for row in [*cells, *verdicts]:
        if role(row) == "power":
            key = (str(row["rest"]), str(row["setting"]), str(row["test"]), float(row["share"]))
            by[key].append(row)
    out = []
    order = {name: i for i, name in enumerate([*tests, DATASET_VERDICT])}
    for (rest, setting, test, share), rows in sorted(
        by.items(), key=lambda kv: (kv[0][0], kv[0][1], order.get(kv[0][2], -1), kv[0][3])
    ):
        counted = _count(rows)
        low, high = clopper_pearson(counted["evidence"], counted["applicable"])
        out.append(
            {
                "rest": rest,
                "setting": setting,
                "test": test,
                "share": share,
                **counted,
                "tpr": counted["evidence"] / counted["applicable"]
                if counted["applicable"]
                else None,
                "tpr_low": low,
                "tpr_high": high,
            }
        )
    return out


def fpr_table(fpr: Sequence[Mapping[str, Any]], inapplicable: Mapping[str, str]) -> list[list[str]]:
    """The FPR rows as table cells; ``inapplicable`` names the tests with no applicable
    negative cell and why (Min-K% Prob and row order need log-probabilities)."""
    body = []
    for r in fpr:
        n = r["applicable"]
        if n:
            bound = f"{r['fpr_upper_95']:.4f}"
            group_bound = f"{r['groups_evidence']}/{r['groups']}, {r['group_upper_95']:.4f}"
        else:
            bound = inapplicable.get(r["test"], "not applicable on every cell")
            group_bound = "-"
        body.append(
            [
                r["setting"],
                r["test"],
                str(n),
                str(r["cells"] - n),
                str(r["evidence"]),
                str(r["ambiguous"]),
                bound,
                group_bound,
            ]
        )
    return body


FPR_HEADER = (
    "setting",
    "test",
    "negatives",
    "n/a",
    "evidence",
    "ambiguous",
    "FPR per cell <= (95%)",
    "groups with evidence, FPR per group <= (95%)",
)
"""The FPR table's columns: applicable negative cells, those not applicable, ``evidence`` and
``ambiguous`` among the applicable, the exact one-sided 95 % upper bound of the FPR per cell,
and per model × file group (``GROUP_KEY``): the groups with an ``evidence`` cell among the
applicable groups, and the same bound with the group as the unit."""


def power_markdown(power: Sequence[Mapping[str, Any]]) -> str:
    """One table per rest and setting: tests as rows, shares as columns, TPR with interval."""
    shares = sorted({float(r["share"]) for r in power})
    parts = []
    groups: dict[tuple[str, str], dict[str, dict[float, Mapping[str, Any]]]] = defaultdict(dict)
    for r in power:
        groups[(r["rest"], r["setting"])].setdefault(r["test"], {})[float(r["share"])] = r
    for (rest, setting), by_test in groups.items():
        body = []
        for test, by_share in by_test.items():
            cells = []
            for share in shares:
                r = by_share.get(share)
                if r is None or not r["applicable"]:
                    cells.append("-")
                else:
                    rate = fraction(r["evidence"], r["applicable"])
                    cells.append(f"{rate} [{r['tpr_low']:.2f}, {r['tpr_high']:.2f}]")
            body.append([test, *cells])
        header = ["test", *(f"TPR at share {s:g}" for s in shares)]
        parts.append(f"### rest: {rest}, setting: {setting}\n\n" + markdown_table(header, body))
    return "\n\n".join(parts)


def file_power_markdown(verdicts: Sequence[Mapping[str, Any]]) -> str:
    """Each dataset verdict's power per file (the product's, then its variants): one table
    per verdict, rest and setting, files as rows, shares as columns, ``evidence`` among
    applicable verdicts. A share is a number of rows, so a small file can miss at a share
    that a large one never misses; pooling hides it."""
    by: dict[tuple[str, str, str, str, float], list[Mapping[str, Any]]] = defaultdict(list)
    for row in verdicts:
        if role(row) == "power":
            key = (
                str(row["test"]),
                str(row["rest"]),
                str(row["setting"]),
                str(row["dataset"]),
                float(row["share"]),
            )
            by[key].append(row)
    shares = sorted({key[4] for key in by})
    parts = []
    for label, rest, setting in sorted(
        {key[:3] for key in by}, key=lambda k: (_verdict_order(k[0]), k[1], k[2])
    ):
        body = []
        for dataset in sorted({key[3] for key in by if key[:3] == (label, rest, setting)}):
            cells = []
            for share in shares:
                counted = _count(by.get((label, rest, setting, dataset, share), []))
                found, applicable = counted["evidence"], counted["applicable"]
                if applicable:
                    low, high = clopper_pearson(found, applicable)
                    cells.append(f"{fraction(found, applicable)} [{low:.2f}, {high:.2f}]")
                else:
                    cells.append("-")
            body.append([dataset, *cells])
        header = ["file", *(f"share {s:g}" for s in shares)]
        parts.append(
            f"### {label} per file, rest: {rest}, setting: {setting}\n\n"
            + markdown_table(header, body)
        )
    return "\n\n".join(parts)


def power_figure(power: Sequence[Mapping[str, Any]], path: Path) -> None:
    """TPR by share with its interval: a row of panels per rest, a column per setting; the
    dataset verdict bold with its interval, each test thin."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rests = sorted({r["rest"] for r in power})
    settings = sorted({r["setting"] for r in power})
    shares = sorted({float(r["share"]) for r in power})
    if not rests:
        return
    figure, axes = plt.subplots(
        len(rests),
        len(settings),
        figsize=(4.6 * len(settings), 3.4 * len(rests)),
        squeeze=False,
        sharex=True,
        sharey=True,
    )
    for (i, rest), (j, setting) in product(enumerate(rests), enumerate(settings)):
        ax = axes[i][j]
        lines: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for r in power:
            if (r["rest"], r["setting"]) == (rest, setting) and r["applicable"]:
                lines[r["test"]].append(r)
        for test, points in lines.items():
            points = sorted(points, key=lambda r: r["share"])
            x = [p["share"] for p in points]
            y = [p["tpr"] for p in points]
            err = [
                [p["tpr"] - p["tpr_low"] for p in points],
                [p["tpr_high"] - p["tpr"] for p in points],
            ]
            bold = test == DATASET_VERDICT
            ax.errorbar(
                x,
                y,
                yerr=err if bold else None,
                label=test,
                linewidth=2.5 if bold else 0.9,
                color="black" if bold else None,
                capsize=3 if bold else 0,
                marker="o" if bold else ".",
            )
        ax.set_xscale("log")
        ax.set_xticks(shares, [f"{share:g}" for share in shares])
        ax.minorticks_off()
        ax.set_title(f"rest {rest}, {setting} counts", fontsize=9)
        ax.set_ylim(-0.02, 1.02)
    for row in axes:
        row[0].set_ylabel("TPR (evidence)")
    for ax in axes[-1]:
        ax.set_xlabel("share of rows known")
    axes[0][-1].legend(fontsize=6, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
