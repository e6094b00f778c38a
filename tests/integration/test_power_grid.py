"""The power grid as a real Hydra sweep (two shares, two seeds, one file, one test), and its
power table read back from MLflow."""

from __future__ import annotations

import csv

import pytest
from test_calibration_grid import calibration_table, sweep


@pytest.fixture(scope="module")
def power(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], list[dict]]:
    outputs = tmp_path_factory.mktemp("outputs")
    sweep(
        outputs,
        "+grid=power",
        "test=calibration_rows",
        "+test.suite=[row_completion]",
        "model.recall.share=0.0,0.6",
        "seed=0,1",
        "dataset=wine",
        "tracking.traces=false",
    )
    out, _ = calibration_table(outputs)
    assert (out / "power.png").stat().st_size > 0
    with (out / "power.csv").open() as handle:
        table = list(csv.DictReader(handle))
    with (out / "calibration_cells.csv").open() as handle:
        cells = list(csv.DictReader(handle))
    return table, cells


def test_every_share_and_seed_is_its_own_power_cell(power) -> None:
    _, cells = power
    keys = {(c["model"], float(c["share"]), float(c["seed"]), c["role"]) for c in cells}
    assert keys == {
        ("oracle-partial", share, seed, "power") for share in (0.0, 0.6) for seed in (0.0, 1.0)
    }


def test_row_completion_finds_the_rows_known_and_nothing_without_them(power) -> None:
    table, _ = power
    (row,) = [r for r in table if r["test"] == "row_completion"]
    assert row["queries"] == "default counts"
    assert row["TPR at 0"] == "0/2 = 0.00"  # knows no row: the learner, a negative in disguise
    assert row["TPR at 0.6"] == "2/2 = 1.00"
