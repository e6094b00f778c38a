"""Cells get the right role, and the rates count applicable cells only."""

from __future__ import annotations

import pandas as pd
import pytest

from tabmem.report.calibration import Role, calibration_cells, calibration_frame, cell_role
from tabmem.report.power import power_figure, power_frame, power_tables, smallest_share_frame


@pytest.mark.parametrize(
    ("model", "dataset", "transform", "role"),
    [
        ("oracle-learner", "iris", "original", Role("negative", "oracle-learner on real files")),
        ("oracle-copula", "adult", "original", Role("negative", "oracle-copula on real files")),
        ("oracle-copula", "iris", "twin", Role("negative", "oracle-copula on twins")),
        (
            "oracle-memorizer",
            "iris",
            "original",
            Role("positive", "oracle-memorizer on real files"),
        ),
        ("oracle-memorizer", "iris", "twin", Role("negative", "oracle-memorizer on twins")),
        ("oracle-memorizer", "synthetic-novel", "original", None),
        (
            "smollm2-135m",
            "synthetic-novel",
            "original",
            Role("negative", "smollm2-135m on synthetic-novel"),
        ),
        ("smollm2-135m", "iris", "original", None),
        ("smollm2-135m", "adult", "twin", Role("negative", "smollm2-135m on twins")),
        ("oracle-null", "iris", "perturbed", None),
        ("oracle-partial", "wine", "original", Role("power", "oracle-partial on real files")),
        ("oracle-partial", "wine", "twin", Role("negative", "oracle-partial on twins")),
        ("oracle-first-rows", "synthetic-novel", "original", None),
    ],
)
def test_cell_roles(model: str, dataset: str, transform: str, role: Role | None) -> None:
    assert cell_role(model, dataset, transform) == role


def test_rates_leave_out_cells_that_do_not_apply_and_name_the_false_positives() -> None:
    runs = pd.DataFrame(
        [
            ("oracle-learner", "iris", "existence", "original", "evidence"),
            ("oracle-learner", "wine", "existence", "original", "no_evidence"),
            ("oracle-null", "wine", "existence", "twin", "not_applicable"),
            ("oracle-null", "iris", "existence", "original", "ambiguous"),
            ("oracle-memorizer", "iris", "existence", "original", "evidence"),
            ("oracle-memorizer", "wine", "existence", "original", "no_evidence"),
            ("smollm2-135m", "iris", "existence", "original", "evidence"),
        ],
        columns=["model", "dataset", "test", "transform", "verdict"],
    ).assign(run_id=lambda f: [f"r{i}" for i in range(len(f))])
    cells = calibration_cells(runs)
    assert len(cells) == 6  # the embedded model on a real file has no role
    row = calibration_frame(cells).set_index("test").loc["existence"]
    assert row["FPR"] == "1/3 = 0.33"
    assert row["false positives"] == "oracle-learner × iris"
    assert row["negatives n/a"] == 1
    assert row["TPR"] == "1/2 = 0.50"
    assert row["TPR 95% CI"] == "[0.01, 0.99]"


def power_runs() -> pd.DataFrame:
    """oracle-partial on two files at two shares and five seeds: row completion finds 0.4
    on every seed and 0.1 on two of five; a learner's false positive on wine."""
    rows = []
    for dataset in ("iris", "wine"):
        for share in (0.1, 0.4):
            for seed in range(5):
                found = share == 0.4 or seed < 2
                verdict = "evidence" if found else "no_evidence"
                rows.append(("oracle-partial", dataset, "row_completion", verdict, share, seed))
    rows.append(("oracle-learner", "wine", "row_completion", "evidence", None, 0))
    rows.append(("oracle-learner", "iris", "row_completion", "no_evidence", None, 0))
    frame = pd.DataFrame(
        rows, columns=["model", "dataset", "test", "verdict", "param.model.recall.share", "s"]
    )
    return frame.assign(
        transform="original",
        suite="calibration_rows",
        run_id=[f"r{i}" for i in range(len(frame))],
        **{"param.seed": frame["s"]},
    )


def test_partial_memorizers_are_power_cells_not_the_memorizers_tpr() -> None:
    cells = calibration_cells(power_runs())
    power = cells[cells["role"] == "power"]
    assert len(power) == 20
    assert set(power["group"]) == {
        "oracle-partial knowing 0.1 of the rows",
        "oracle-partial knowing 0.4 of the rows",
    }
    assert calibration_frame(cells).set_index("test").loc["row_completion", "TPR"] == "-"


def test_power_table_reads_each_tpr_beside_the_measured_fpr() -> None:
    cells = calibration_cells(power_runs())
    row = power_frame(cells, ["row_completion"]).iloc[0]
    assert row["queries"] == "default counts"
    assert row["FPR"] == "1/2 = 0.50"
    assert row["TPR at 0.1"] == "4/10 = 0.40"
    assert row["TPR at 0.4"] == "10/10 = 1.00"
    smallest = smallest_share_frame(cells, ["row_completion"]).iloc[0]
    assert (smallest["iris"], smallest["wine"]) == ("0.4", "0.4")
    tables = power_tables(cells, ["row_completion"])
    assert [t.name for t in tables] == ["power", "power_smallest_share"]
    assert power_figure(cells, ["row_completion"]).axes[0].get_lines()
