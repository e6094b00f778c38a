"""Every cell of a run or grid is checked before the first one starts (issue 56): settings of
the wrong kind or out of range, data files, API keys and server URLs. Each problem is said once,
with the cells it stops; the command exits with status 1 and nothing runs or is logged. A dry
run says the same. These run ``tabmem run`` in this process (``harness.call_here``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import ONE_PROCESS, call_here, quiet_into, run_here

from tabmem.main import run

KEY_SENTENCES = {
    "gpt-4": "Model 'gpt-4' needs an API key in $OPENAI_API_KEY",
    "claude-sonnet": "Model 'claude-sonnet' needs an API key in $ANTHROPIC_API_KEY",
    "llama-70b": "Model 'llama-70b' needs the server URL in $VLLM_API_BASE",
}


@pytest.fixture
def no_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "VLLM_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def _nothing_ran(outputs: Path) -> None:
    assert not (outputs / "mlflow.db").exists()
    assert not (outputs / "runs").exists() and not (outputs / "multirun").exists()


@pytest.mark.parametrize("value", ["-3", "0", "2.5"])
def test_a_query_count_that_is_no_count_stops_the_run_before_it_starts(tmp_path, value):
    outputs = tmp_path / "outputs"
    done = call_here(
        run,
        "model=oracle-memorizer",
        "dataset=iris",
        "test=row_completion",
        f"test.n_queries={value}",
        *quiet_into(outputs),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"tabmem run: test.n_queries={value} does not fit test=row_completion")
    assert line.endswith("Nothing was run or logged.")
    assert done.stdout == ""
    _nothing_ran(outputs)


def test_missing_keys_and_urls_stop_a_grid_before_its_first_cell(tmp_path, no_keys):
    outputs = tmp_path / "outputs"
    done = call_here(
        run,
        "-m",
        "model=gpt-4,claude-sonnet,llama-70b,oracle-null",
        "dataset=iris,titanic",
        "test=header",
        ONE_PROCESS,
        *quiet_into(outputs),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == (
        "tabmem run: this grid cannot start (3 problems; nothing was run or logged):"
    )
    for sentence in KEY_SENTENCES.values():
        [said] = [line for line in lines if sentence in line]  # once, not once per cell
        assert said.endswith("(2 of 8 cells)")
    assert len(lines) == 4
    assert "Launching jobs" not in done.stdout + done.stderr
    _nothing_ran(outputs)


def test_a_dry_run_of_that_grid_says_the_same_prices_it_and_exits_with_1(tmp_path, no_keys):
    outputs = tmp_path / "outputs"
    done = call_here(
        run,
        "-m",
        "model=gpt-4,llama-70b",
        "dataset=iris",
        "test=header",
        "dry_run=true",
        ONE_PROCESS,
        *quiet_into(outputs),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    for model in ("gpt-4", "llama-70b"):
        assert done.stderr.count(KEY_SENTENCES[model]) == 1
    assert "a real run would stop before its first cell" in done.stderr
    assert "tabmem dry run: nothing was sent" in done.stdout  # the bill is still printed
    plans = sorted(outputs.glob("multirun/*/*/*/plan-header.json"))
    assert len(plans) == 2
    needs = sorted(json.loads(p.read_text())["needs"] for p in plans)
    assert needs == [["$OPENAI_API_KEY"], ["$VLLM_API_BASE"]]
    assert not (outputs / "mlflow.db").exists()


def test_a_missing_data_file_stops_every_cell_that_reads_it_in_one_sentence(tmp_path):
    outputs = tmp_path / "outputs"
    absent = tmp_path / "absent.csv"
    done = call_here(
        run,
        "-m",
        "model=oracle-memorizer,oracle-null",
        "dataset=csv",
        f"dataset.path={absent}",
        "dataset.name=mine",
        "test=header,row_completion",
        ONE_PROCESS,
        *quiet_into(outputs),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and "(1 problem;" in lines[0]
    assert "Dataset 'mine'" in lines[1] and lines[1].endswith("(4 of 4 cells)")
    _nothing_ran(outputs)


def test_a_re_run_says_how_many_finished_cells_it_resumes_from(tmp_path, no_keys):
    outputs = tmp_path / "outputs"
    grid = ("-m", "model=oracle-memorizer", "dataset=iris", "test=header", ONE_PROCESS)
    first = run_here(outputs, *grid)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "Resuming" not in first.stdout
    # the same grid with one more cell: the finished one is kept, the new one runs
    again = run_here(
        outputs, "-m", "model=oracle-memorizer", "dataset=iris,titanic", "test=header", ONE_PROCESS
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert (
        "Resuming: 1 of 2 cells finished in an earlier run and are kept (force=true runs them "
        "again); 1 to run." in again.stdout
    )
