"""A small calibration grid as real Hydra sweeps, and its table read back from MLflow."""

from __future__ import annotations

import csv
import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from harness import ONE_PROCESS, run_here

from tabmem.cli import calibration

MODELS = "oracle-memorizer,oracle-learner,oracle-null"


def sweep(outputs: Path, *overrides: str) -> None:
    """A quiet sweep into ``outputs``, in this process; it must succeed."""
    done = run_here(outputs, *overrides, ONE_PROCESS)
    assert done.returncode == 0, done.stderr[-3000:]


def calibration_table(outputs: Path) -> tuple[Path, str]:
    """``tabmem calibration`` over the sweep's store: its folder and what it printed."""
    out, printed = outputs / "calibration", io.StringIO()
    with redirect_stdout(printed):
        status = calibration([f"--tracking-uri=sqlite:///{outputs / 'mlflow.db'}", f"--out={out}"])
    assert status == 0, printed.getvalue()[-3000:]
    return out, printed.getvalue()


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[dict], str]:
    outputs = tmp_path_factory.mktemp("outputs")
    sweep(
        outputs,
        "-m",
        f"model={MODELS}",
        "dataset=iris",
        "transform=original,twin",
        "test=header",
        "experiment=calibrate",
    )
    out, printed = calibration_table(outputs)
    with (out / "calibration.csv").open() as handle:
        rows = {row["test"]: row for row in csv.DictReader(handle)}
    with (out / "calibration_cells.csv").open() as handle:
        cells = list(csv.DictReader(handle))
    return rows, cells, printed


def test_every_cell_has_its_role(table: tuple[dict, list[dict], str]) -> None:
    _, cells, _ = table
    roles = {(c["model"], c["transform"]): (c["role"], c["group"]) for c in cells}
    assert roles == {
        ("oracle-memorizer", "original"): ("positive", "oracle-memorizer on real files"),
        ("oracle-memorizer", "twin"): ("negative", "oracle-memorizer on twins"),
        ("oracle-learner", "original"): ("negative", "oracle-learner on real files"),
        ("oracle-learner", "twin"): ("negative", "oracle-learner on twins"),
        ("oracle-null", "original"): ("negative", "oracle-null on real files"),
        ("oracle-null", "twin"): ("negative", "oracle-null on twins"),
    }


def test_the_header_test_finds_the_memorizer_and_no_negative(table) -> None:
    rows, cells, printed = table
    header = rows["header"]
    assert header["FPR"] == "0/5 = 0.00"
    assert header["TPR"] == "1/1 = 1.00"
    assert header["FPR 95% CI"] == "[0.00, 0.52]"
    assert "Calibration" in printed and "| header |" in printed
    twins = [c for c in cells if c["transform"] == "twin"]
    assert all(c["verdict"] != "evidence" for c in twins)
