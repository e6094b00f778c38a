"""A small real sweep shared by the tracing and browser tests: two reference models on iris."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import ONE_PROCESS, run_here

UI_EXPERIMENT = "ui-test"


@pytest.fixture(scope="session")
def ui_sweep(tmp_path_factory) -> Path:
    """The outputs folder of ``model=oracle-memorizer,oracle-null dataset=iris test=header``."""
    outputs = tmp_path_factory.mktemp("ui-outputs")
    done = run_here(
        outputs,
        "-m",
        "model=oracle-memorizer,oracle-null",
        "dataset=iris",
        "test=header",
        ONE_PROCESS,
        f"experiment={UI_EXPERIMENT}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return outputs
