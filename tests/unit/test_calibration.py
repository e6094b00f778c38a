"""Cells get the right role, and the rates count applicable cells only."""

from __future__ import annotations

import pandas as pd
import pytest

from tabmem.report.calibration import Role, calibration_cells, calibration_frame, cell_role


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
