"""The probes suite as a real Hydra sweep (the memorizer on real and obfuscated iris), read back
from MLflow, and the probes table built from those runs. The other reference models are checked
in-process (tests/unit/test_probes_tests.py) and in the acceptance grid (docs/probes.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import ONE_PROCESS, run_here
from mlflow.tracking import MlflowClient

from tabmem.report.probes_table import probes_tables
from tabmem.tracking.runs import load_runs

EXPERIMENT = "probes-grid"
MODELS = ("oracle-memorizer",)
TRANSFORMS = ("original", "obfuscated")
TESTS = ("completion_choice", "existence")
N = 20


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    done = run_here(
        outputs,
        "-m",
        f"model={','.join(MODELS)}",
        "dataset=iris",
        f"transform={','.join(TRANSFORMS)}",
        "test=probes",
        f"test.completion_choice.n_queries={N}",
        f"test.existence.n_queries={N}",
        ONE_PROCESS,
        f"experiment={EXPERIMENT}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    uri = f"sqlite:///{outputs / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    found = client.search_runs([experiment.experiment_id], max_results=100)
    by_cell = {
        (r.data.tags["model"], r.data.tags["transform"], r.data.tags["test"]): r
        for r in found
        if r.data.tags.get("scope") != "dataset"  # both probes' dataset verdict
    }
    return by_cell, client, outputs, uri


def test_each_probe_of_each_cell_is_one_finished_run(runs):
    by_cell, _, _, _ = runs
    assert set(by_cell) == {(m, t, p) for m in MODELS for t in TRANSFORMS for p in TESTS}
    for key, run in by_cell.items():
        assert run.info.status == "FINISHED", key
        assert run.data.tags["suite"] == "probes" and run.data.tags["dataset"] == "iris"


def test_the_memorizer_knows_real_rows_only(runs):
    by_cell, _, _, _ = runs
    for (model, transform, test), run in by_cell.items():
        metrics, verdict = run.data.metrics, run.data.tags["verdict"]
        # Each question's baseline is chance (0.2) or 1 where the data-only rule is right.
        assert metrics["n_queries"] == N and 0.2 <= metrics["baseline"] < 1
        assert metrics["n_unparseable"] == 0 and metrics["n_failed_queries"] == 0
        if (model, transform) == ("oracle-memorizer", "original"):
            assert verdict == "evidence" and metrics["n_hits"] == N
            assert metrics["chance_p_value"] == pytest.approx(0.2**N)
            # All right: p is the product of the baselines, at most their mean to the N.
            assert metrics["p_value"] <= metrics["baseline"] ** N * (1 + 1e-9)
        else:
            assert verdict in {"no_evidence", "ambiguous"}, (model, transform, test)
            assert metrics["p_value"] > 0.001 and metrics["n_hits"] < N / 2


def test_every_question_is_in_mlflow_with_its_options_and_letter(runs):
    by_cell, client, outputs, _ = runs
    run = by_cell[("oracle-memorizer", "original", "existence")]
    path = client.download_artifacts(run.info.run_id, "queries.json", str(outputs / "dl"))
    table = json.loads(Path(path).read_text())
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    assert len(rows) == N
    for row in rows:
        assert row["completion"] == row["expected"] == row["picked"]
        assert len(json.loads(row["options"])) == 5
        assert "Iris" in row["prompt"] and "E) sepal_length =" in row["prompt"]


def test_the_report_table_reads_the_runs(runs):
    _, _, _, uri = runs
    tables = {t.name: t for t in probes_tables(load_runs(uri, [EXPERIMENT]))}
    assert set(tables) == {"probes-oracle-memorizer"}
    row = tables["probes-oracle-memorizer"].frame.iloc[0]
    assert row["dataset"] == "iris"
    assert row["real · completion"] == "1.00 ✓" and row["real · existence"] == "1.00 ✓"
    assert not row["obfuscated · existence"].endswith("✓") and row["like · existence"] == ""
