"""API keys never reach MLflow, logs, the cache or artifacts; the MLflow UI stays on 127.0.0.1.

A sweep runs ``model=gpt-4`` with a fake key against two local servers: one answers (after a
server error, so the retry path runs), one refuses the key and repeats it in its error message,
as a careless proxy might. Then every byte under ``outputs/`` and everything printed is
searched for the key.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from flaky_grid import ROOT, mlflow_runs, run_sweep
from flaky_server import Fault, FlakyServer, ScriptedFaults
from harness import ONE_PROCESS

from tabmem.data import dataset_specs, load_dataset

KEY = f"sk-tabmem-fake-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    iris = load_dataset(dataset_specs()["iris"])
    good = FlakyServer(
        [iris], ScriptedFaults([Fault.SERVER_ERROR]), default_model="oracle-memorizer"
    )
    refusing = FlakyServer([iris], ScriptedFaults([Fault.UNAUTHORIZED] * 10))
    with good, refusing:
        result = run_sweep(
            outputs,
            None,
            "secrets",
            "-m",
            "model=gpt-4",
            "dataset=iris",
            "test=header",
            f"+model.api_base={good.base_url},{refusing.base_url}",
            "+model.retry={base_delay:0.01}",
            ONE_PROCESS,
            OPENAI_API_KEY=KEY,
        )
        yield result, outputs, good, refusing


def test_the_key_was_used(swept):
    result, _, good, refusing = swept
    assert result.returncode == 1, result.stderr[-3000:]  # the refused key's cell failed
    assert "1 finished, 0 skipped, 1 failed" in result.stdout
    assert {a.authorization for a in good.arrivals} == {f"Bearer {KEY}"}
    assert refusing.request_count >= 1


def test_a_refused_key_fails_the_cell_with_the_key_masked(swept):
    _, outputs, _, refusing = swept
    runs, _ = mlflow_runs(outputs, "secrets")
    [failed] = [r for r in runs if r.info.status == "FAILED"]
    assert "refused by its provider" in failed.data.tags["error"]
    assert "***" in failed.data.tags["error"]
    # the first refusal stops the cell: at most the queries already in flight were sent
    assert refusing.request_count <= 4


def test_the_key_is_nowhere_under_outputs_or_in_the_output(swept):
    result, outputs, _, _ = swept
    files = [p for p in outputs.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in files)
    assert any(p.name == "responses.sqlite" for p in files)
    assert any(p.name == "queries.json" for p in files)
    leaks = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert leaks == []
    assert KEY not in result.stdout and KEY not in result.stderr


def test_the_mlflow_ui_listens_on_localhost_unless_told_otherwise():
    def ui_command(*args: str) -> str:
        dry = subprocess.run(
            ["make", "-n", "ui", *args], cwd=ROOT, capture_output=True, text=True, check=True
        )
        return next(line for line in dry.stdout.splitlines() if "mlflow ui" in line)

    assert "--host 127.0.0.1" in ui_command()
    assert "--host 0.0.0.0" in ui_command("UI_HOST=0.0.0.0")


def test_model_configs_name_key_variables_never_keys(project_root: Path):
    for path in (project_root / "conf" / "model").glob("*.yaml"):
        text = path.read_text()
        assert "api_key:" not in text, path
        assert "sk-" not in text, path
