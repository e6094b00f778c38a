"""A finished grid's bundle (``tabmem bundle``), copied to an empty folder and checked there by
``tabmem rescore BUNDLE`` in a subprocess, offline, with a fresh store, reproduces every cell's
verdict and the dataset verdicts; a tampered answer or data digest is reported and exits 1;
bad input is one sentence."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness import ENV, ONE_PROCESS, ROOT, call_here, run_here, seed_store

from tabmem.cli import bundle
from tabmem.report.bundle import MANIFEST, Manifest
from tabmem.rescore.cli import main as rescore

CELLS = [
    ("oracle-memorizer", "header", "evidence"),
    ("oracle-memorizer", "row_completion", "evidence"),
    ("oracle-null", "header", "no_evidence"),
    ("oracle-null", "row_completion", "no_evidence"),
]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    done = run_here(
        outputs,
        "-m",
        "model=oracle-memorizer,oracle-null",
        "dataset=iris",
        "test=header,row_completion",
        "experiment=handed-over",
        ONE_PROCESS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return f"sqlite:///{outputs / 'mlflow.db'}"


@pytest.fixture(scope="module")
def bundled(grid, tmp_path_factory):
    out = tmp_path_factory.mktemp("bundles") / "handed-over-bundle"
    made = call_here(bundle, "handed-over", f"--tracking-uri={grid}", f"--out={out}")
    assert made.returncode == 0, made.stderr
    assert "4 cells, 2 dataset verdicts and 1 data file in" in made.stdout
    return out


def test_the_bundle_holds_each_cell_and_its_recorded_verdict(bundled):
    manifest = Manifest.read(bundled)
    found = {(c.model, c.test): c for c in manifest.cells}
    assert sorted(found) == sorted((m, t) for m, t, _ in CELLS)
    for model, test, verdict in CELLS:
        cell = found[(model, test)]
        assert cell.verdict == verdict and cell.seed == 0
        assert {p.name for p in (bundled / cell.folder).iterdir()} == {
            "config.yaml",
            "result.yaml",
            "queries.json",
        }
    assert [d.verdict for d in manifest.dataset_verdicts] == ["evidence", "no_evidence"]
    assert manifest.data["iris"].file == "iris.csv"
    table = (bundled / "verdicts.md").read_text()
    line = "| oracle-null | iris | original | row_completion | 0 | no_evidence | 1 | 0/25 |"
    assert line in table


def test_rescoring_the_bundle_in_an_empty_folder_reproduces_every_verdict(bundled, tmp_path):
    reviewer = tmp_path / "reviewer"
    shutil.copytree(bundled, reviewer / "bundle")
    seed_store(reviewer / "outputs" / "mlflow.db")  # a fresh store, without its migrations' time
    done = subprocess.run(
        [sys.executable, "-m", "tabmem.cli", "rescore", "bundle"],
        cwd=reviewer,
        env={**ENV, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "Data: iris.csv has the bundle's sha256.",
        "4 of 4 cells reproduce the recorded verdict.",
        "2 of 2 dataset verdicts reproduce the recorded verdict.",
    ]
    assert sorted(p.name for p in reviewer.iterdir()) == ["bundle", "outputs"]


def test_a_tampered_answer_and_data_digest_are_reported(bundled, tmp_path):
    copy = Path(shutil.copytree(bundled, tmp_path / "bundle"))
    manifest = json.loads((copy / MANIFEST).read_text())
    (memorized,) = [
        c for c in manifest["cells"] if (c["model"], c["test"]) == CELLS[1][:2]
    ]  # oracle-memorizer's row completions, every one answered with a row iris never had
    path = copy / memorized["folder"] / "queries.json"
    table = json.loads(path.read_text())
    at = table["columns"].index("completion")
    for row in table["data"]:
        row[at] = "9.9,9.9,9.9,9.9,Iris-unknown"
    path.write_text(json.dumps(table))
    manifest["data"]["iris"]["sha256"] = "0" * 64
    (copy / MANIFEST).write_text(json.dumps(manifest))
    seed_store(tmp_path / "outputs" / "mlflow.db")
    done = call_here(rescore, str(copy), f"--outputs-dir={tmp_path / 'outputs'}")
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert "Data: iris.csv differs from the bundle's file (sha256 " in done.stdout
    assert "3 of 4 cells reproduce the recorded verdict." in done.stdout
    assert (
        "  differs: oracle-memorizer | iris | row_completion | original: recorded evidence, "
        "rescored no_evidence" in done.stdout
    )


def test_bad_input_is_one_sentence(grid, tmp_path):
    unknown = call_here(bundle, "no-such-grid", f"--tracking-uri={grid}")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: No experiment 'no-such-grid' with runs in ")
    assert "handed-over" in unknown.stderr and len(unknown.stderr.splitlines()) == 1
    no_cell = call_here(bundle, "handed-over-report", f"--tracking-uri={grid}")  # its page's
    assert no_cell.returncode == 1
    assert no_cell.stderr.startswith(
        "error: Experiment 'handed-over-report' has no finished cell run among its 1 runs: "
    )
    not_one = call_here(rescore, str(tmp_path))
    assert not_one.returncode == 1
    assert not_one.stderr == (
        f"error: {tmp_path} is not a bundle: it has no bundle.json (tabmem bundle EXPERIMENT "
        "writes one).\n"
    )
