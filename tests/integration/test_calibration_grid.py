"""A small calibration grid as real Hydra sweeps, and its table read back from MLflow."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import ONE_PROCESS, seed_store

ROOT = Path(__file__).resolve().parents[2]
MODELS = "oracle-memorizer,oracle-learner,oracle-null"


def _run(args: list[str], outputs: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[dict], str]:
    outputs = tmp_path_factory.mktemp("outputs")
    seed_store(outputs / "mlflow.db")
    common = [f"outputs_dir={outputs}", "progress=false", "show_queries=false"]
    _run(
        [
            "run.py",
            "-m",
            f"model={MODELS}",
            "dataset=iris",
            "transform=original,twin",
            "test=header",
            "experiment=calibrate",
            ONE_PROCESS,
            *common,
        ],
        outputs,
    )
    out = outputs / "calibration"
    printed = _run(
        [
            "scripts/calibration_table.py",
            f"--tracking-uri=sqlite:///{outputs / 'mlflow.db'}",
            f"--out={out}",
        ],
        outputs,
    ).stdout
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
