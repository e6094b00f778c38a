"""The calibration table (``make calibrate``): how often each test cries wolf, and how often it
finds what is there.

Every finished cell of the calibration grid has a role:

- **negative** for a test of rows seen: a model that cannot have seen the rows asked about.
  The reference models that know no rows (``oracle-null``, ``oracle-marginal``,
  ``oracle-learner``, ``oracle-copula``) on any file; any model on a twin (``transform=twin``:
  rows nobody has seen); a language model (not an oracle, which knows every shipped file) on
  ``synthetic-novel``; a contamination-lab checkpoint on a dataset it never read.
- **positive**: the ``oracle-memorizer`` on a real file; a lab checkpoint on a dataset it read.
- **power**: a model that knows part of a file (``oracle-partial``: a share of its rows;
  ``oracle-first-rows``: its first rows) on that file: the power table by share
  (``tabmem.report.power``), kept apart from the full memorizer's true-positive rate.

For each test of rows seen the table gives the false-positive rate (``evidence`` cells /
applicable negative cells) and the true-positive rate, each with a Clopper-Pearson 95 %
interval and the cells behind it. Tests of knowledge (names, values, distributions) are
expected to find the learner and, in part, the marginal oracle: their rows count only the null
model and the twins' and novel data's false alarms of *row* knowledge as errors, and show the
rest as information.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tabmem.battery.base import claiming_in_order
from tabmem.errors import TabmemError
from tabmem.lab.report import lab_cells
from tabmem.report.dataset_verdicts import DATASET_TEST
from tabmem.report.power import power_figure, power_tables
from tabmem.report.rates import evidence_rate, interval_text, share_text
from tabmem.report.writers import ReportTable, write_figure, write_table


def rows_seen_rows() -> list[str]:
    """The tests of rows seen in table order, then the dataset verdict that combines them
    (``test: dataset``), measured like a test."""
    return [*claiming_in_order("rows_seen"), DATASET_TEST]


KNOW_NO_ROWS = (
    "oracle-null",
    "oracle-marginal",
    "oracle-learner",
    "oracle-copula",
    "oracle-forest",
)
KNOW_PART = ("oracle-partial", "oracle-first-rows")
DISTINCT = ("suite", "param.seed", "param.model.recall.share", "param.model.recall.rows")
"""Run columns that tell calibration cells apart besides model, dataset, test and transform:
the power grid runs each cell at several shares, seeds and query counts."""
NOVEL = "synthetic-novel"
CALIBRATION_EXPERIMENT = "calibrate"


@dataclass(frozen=True)
class Role:
    """What a cell says about a test: ``negative`` or ``positive``, and the group it is in."""

    kind: str
    group: str


def cell_role(model: str, dataset: str, transform: str) -> Role | None:
    """The role of an oracle or embedded-model cell (lab cells: ``lab_roles``), or None."""
    oracle = model.startswith("oracle-")
    if transform == "twin":
        return Role("negative", f"{model} on twins")
    if transform != "original":
        return None
    if model in KNOW_NO_ROWS:
        return Role("negative", f"{model} on real files")
    if dataset == NOVEL and not oracle:
        return Role("negative", f"{model} on {NOVEL}")
    if model == "oracle-memorizer" and dataset != NOVEL:
        return Role("positive", "oracle-memorizer on real files")
    if model in KNOW_PART and dataset != NOVEL:
        return Role("power", f"{model} on real files")
    return None


def calibration_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """Every cell with a role: model, dataset, test, transform, verdict, role, group, run_id."""
    columns = [
        *("model", "dataset", "test", "transform", "verdict", "role", "group", "run_id"),
        *("share", "seed", "suite"),
    ]
    rows = []
    for _, run in runs.iterrows():
        if str(run["model"]).startswith("lab-"):
            continue
        role = cell_role(str(run["model"]), str(run["dataset"]), str(run["transform"]))
        if role is not None:
            share = _number(run.get("param.model.recall.share"))
            group = role.group
            if role.kind == "power" and share is not None:
                group = f"{run['model']} knowing {share:g} of the rows"
            rows.append(
                {
                    **{c: run[c] for c in ("model", "dataset", "test", "transform", "verdict")},
                    "role": role.kind,
                    "group": group,
                    "run_id": run["run_id"],
                    "share": share,
                    "seed": _number(run.get("param.seed")),
                    "suite": run.get("suite"),
                }
            )
    rows += lab_roles(runs)
    return pd.DataFrame(rows, columns=columns)


def _number(value: object) -> float | None:
    """A run's parameter as a number, or None where the run has none."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if number != number else number


def lab_roles(runs: pd.DataFrame) -> list[dict]:
    """The contamination lab's cells: positive where the checkpoint read the dataset."""
    column = "param.model.lab.setting"
    if runs.empty or column not in runs:
        return []
    rows = []
    for setting in sorted(runs[column].dropna().unique()):
        for _, cell in lab_cells(runs, str(setting)).iterrows():
            seen = int(cell["seen"]) > 0 and int(cell["passes"]) > 0
            rows.append(
                {
                    "model": cell["model"],
                    "dataset": cell["dataset"],
                    "test": cell["test"],
                    "transform": "original",
                    "verdict": cell["verdict"],
                    "role": "positive" if seen else "negative",
                    "group": f"lab {setting}: {'read' if seen else 'never read'}",
                    "run_id": cell["run_id"],
                }
            )
    return rows


def calibration_frame(cells: pd.DataFrame, tests: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per test: false-positive rate on the negatives, true-positive rate on the
    positives, each with its interval, counts and the cells with evidence (``tests``: those
    that claim rows seen, unless given)."""
    rows = []
    for test in rows_seen_rows() if tests is None else tests:
        mine = cells[cells["test"] == test]
        if mine.empty:
            continue
        negative = evidence_rate(mine[mine["role"] == "negative"])
        positive = evidence_rate(mine[mine["role"] == "positive"])
        rows.append(
            {
                "test": test,
                "FPR": share_text(negative),
                "FPR 95% CI": interval_text(negative),
                "false positives": negative["cells"] or "-",
                "TPR": share_text(positive),
                "TPR 95% CI": interval_text(positive),
                "negatives n/a": negative["not_applicable"],
                "positives n/a": positive["not_applicable"],
            }
        )
    return pd.DataFrame(rows)


def group_frame(cells: pd.DataFrame, tests: Sequence[str]) -> pd.DataFrame:
    """Evidence cells / applicable cells per test and per group of cells."""
    if cells.empty:
        return pd.DataFrame()
    table = {}
    for group in sorted(cells["group"].unique()):
        column = {}
        for test in tests:
            rate = evidence_rate(cells[(cells["group"] == group) & (cells["test"] == test)])
            column[test] = f"{rate['evidence']}/{rate['applicable']}" if rate["applicable"] else "-"
        table[group] = column
    return pd.DataFrame(table).reindex(list(tests)).rename_axis("test").reset_index()


def calibration_tables(runs: pd.DataFrame) -> list[ReportTable]:
    """The calibration tables the runs fill: rows-seen rates, then the rates per group for the
    tests of rows seen and of knowledge. Empty when no run has a role."""
    cells = calibration_cells(runs)
    if cells.empty:
        return []
    run_ids = sorted(cells["run_id"])
    return [*calibration_main_tables(cells, run_ids), *power_tables(cells, rows_seen_rows())]


def calibration_main_tables(cells: pd.DataFrame, run_ids: list[str]) -> list[ReportTable]:
    """The rates of the tests of rows seen and the rates per group of cells."""
    return [
        ReportTable(
            name="calibration",
            title="Calibration: false- and true-positive rates of the tests of rows seen",
            frame=calibration_frame(cells),
            footnotes=[
                "FPR: cells with evidence / applicable negative cells (reference models that "
                "know no rows on real files, any model on twins, language models on "
                "synthetic-novel, lab checkpoints on datasets they never read). TPR: the same "
                "on positive cells (the memorizer on real files, lab checkpoints on datasets "
                "they read). Intervals: Clopper-Pearson 95%. Method: docs/calibration.md.",
            ],
            run_ids=run_ids,
        ),
        ReportTable(
            name="calibration_groups",
            title="Calibration: evidence cells / applicable cells per group of cells",
            frame=group_frame(cells, [*rows_seen_rows(), *claiming_in_order("knowledge")]),
            footnotes=[
                "Tests of knowledge (the last rows) are expected to find the learner and the "
                "marginal oracle, which know names and distributions; evidence there from the "
                "null model would be a false positive.",
            ],
            run_ids=run_ids,
        ),
    ]


def calibration_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the calibration grid and of the contamination lab among ``runs``."""
    if runs.empty or "experiment" not in runs:
        return runs.iloc[0:0]
    experiment = runs["experiment"].astype(str)
    return runs[(experiment == CALIBRATION_EXPERIMENT) | experiment.str.startswith("lab-")]


def write_calibration(tracking_uri: str, out: Path) -> list[Path]:
    """Read the calibration grid's and the lab's runs; write the tables and every cell."""
    from tabmem.tracking.runs import load_runs
    from tabmem.tracking.store import require_store

    require_store(
        tracking_uri,
        "run the grid first (make calibrate, or tabmem run +grid=calibrate) "
        "or pass --tracking-uri.",
    )
    runs = calibration_runs(load_runs(tracking_uri, distinct=DISTINCT))
    tables = calibration_tables(runs)
    if not tables:
        raise TabmemError(
            f"The store has no finished cells of the '{CALIBRATION_EXPERIMENT}' experiment; "
            "run tabmem run +grid=calibrate first."
        )
    out.mkdir(parents=True, exist_ok=True)
    written = [path for table in tables for path in write_table(table, out)]
    cells = calibration_cells(runs)
    if (cells["role"] == "power").any():
        written += write_figure(power_figure(cells, rows_seen_rows()), "power", out)
    path = out / "calibration_cells.csv"
    cells.to_csv(path, index=False)
    return [*written, path]
