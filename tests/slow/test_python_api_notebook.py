"""docs/python-api.ipynb runs from top to bottom (the embedded model, so slow) and logs its
cells to MLflow: the embedded model's two tests and both callables' verdicts."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from mlflow.tracking import MlflowClient
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "python-api.ipynb"
pytestmark = pytest.mark.slow


def test_the_notebook_runs_and_logs_every_cell(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TABMEM_NOTEBOOK_OUTPUTS", str(tmp_path))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    )
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / "docs")}},
    ).execute()
    images = [
        output
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    ]
    assert len(images) == 1
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("tabmem").experiment_id])
    verdicts = {(r.data.tags["model"], r.data.tags["test"]): r.data.tags["verdict"] for r in runs}
    assert verdicts[("knows-iris", "row_completion")] == "evidence"
    assert verdicts[("knows-iris", "header")] == "evidence"
    assert verdicts[("fixed", "row_completion")] == "no_evidence"
    assert verdicts[("fixed", "header")] == "no_evidence"
    assert {verdicts[("smollm2-135m", test)] for test in ("header", "row_completion")} <= {
        "evidence",
        "no_evidence",
        "ambiguous",
    }
    assert all(r.info.status == "FINISHED" for r in runs)
