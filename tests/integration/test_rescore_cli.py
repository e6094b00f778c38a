"""Rescoring through the CLI: a real sweep's queries.json, exported from MLflow and rescored
with ``python -m tabmem.rescore`` (its ``main``, in this process), gives the live run's counts,
statistic and verdict; a published-layout CSV is rescored and reported beside live runs by the
paper tables."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from harness import ONE_PROCESS, call_here, run_here
from mlflow.tracking import MlflowClient

from tabmem.cli import tables
from tabmem.data import dataset_specs, load_dataset
from tabmem.rescore.cli import main as rescore
from tabmem.tracking.runs import load_runs

TESTS = ("row_completion", "first_token", "feature_completion")


def rescore_cli(*args: str) -> subprocess.CompletedProcess:
    return call_here(rescore, *args)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    done = run_here(
        outputs,
        "-m",
        "model=oracle-memorizer,oracle-learner",
        "dataset=iris",
        f"test={','.join(TESTS)}",
        "++test.n_queries=15",
        "experiment=live",
        ONE_PROCESS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return outputs


def test_rescoring_a_live_query_table_gives_the_live_result(store, tmp_path):
    uri = f"sqlite:///{store / 'mlflow.db'}"
    client = MlflowClient(uri)
    live = load_runs(uri, ["live"])
    live = live[live["test"] != "dataset"]  # the tests' cells, not their dataset verdicts
    assert len(live) == 2 * len(TESTS)
    for run in live.itertuples():
        folder = tmp_path / run.run_id
        path = Path(client.download_artifacts(run.run_id, "queries.json", str(folder)))
        done = rescore_cli(
            str(path),
            "--dataset=iris",
            f"--test={run.test}",
            f"--model-name={run.model}",
            "--experiment=rescored",
            f"--outputs-dir={store}",
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Located 15 of 15 lines" in done.stdout
        (again,) = [
            r
            for r in load_runs(uri, ["rescored"]).itertuples()
            if (r.model, r.test) == (run.model, run.test)
        ]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        tags = client.get_run(again.run_id).data.tags
        assert tags["source"] == "transcript" and tags["transcript_sha256"] == digest
        assert tags["verdict"] == client.get_run(run.run_id).data.tags["verdict"]
        live_metrics = client.get_run(run.run_id).data.metrics
        again_metrics = client.get_run(again.run_id).data.metrics
        for name in ("n_hits", "n_queries", "rate", "baseline", "p_value"):
            assert again_metrics[name] == pytest.approx(live_metrics[name], rel=1e-12), name


def test_a_published_transcript_is_rescored_and_shown_by_the_paper_tables(store, tmp_path):
    iris = load_dataset(dataset_specs()["iris"])
    rows = iris.rows
    targets = list(range(20, 140, 6))  # 20 windows of 10 rows
    frame = pd.DataFrame(
        {
            "prefix": ["".join(r + "\n" for r in rows[t - 10 : t]) for t in targets],
            "suffix": [rows[t] for t in targets],
            "response": [rows[t] if i % 2 else rows[0] for i, t in enumerate(targets)],
        }
    )
    foreign = pd.DataFrame({"prefix": ["1,2,3\n4,5,6\n"], "suffix": ["7,8,9"], "response": ["x"]})
    path = tmp_path / "gpt-test-iris-row_completion.csv"
    pd.concat([frame, foreign]).to_csv(path, index=False)
    done = rescore_cli(
        str(path),
        "--dataset=iris",
        "--test=row_completion",
        "--model-name=transcribed-model",
        "--experiment=rescored",
        f"--outputs-dir={store}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Located 20 of 21 lines (1 × " in done.stdout
    uri = f"sqlite:///{store / 'mlflow.db'}"
    rescored = load_runs(uri, ["rescored"])
    (run,) = [r for r in rescored.itertuples() if r.model == "transcribed-model"]
    metrics = MlflowClient(uri).get_run(run.run_id).data.metrics
    assert (metrics["n_hits"], metrics["n_queries"], metrics["queries_not_located"]) == (10, 20, 1)
    paper = tmp_path / "paper"
    written = call_here(tables, f"--tracking-uri={uri}", f"--out={paper}")
    assert written.returncode == 0, written.stderr[-3000:]
    shown = "\n".join(p.read_text() for p in paper.glob("*.md"))
    assert "transcribed-model" in shown


def test_an_unknown_dataset_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where its default outputs folder would be
    path = tmp_path / "t.csv"
    path.write_text("prefix,suffix,response\na,b,c\n")
    done = rescore_cli(str(path), "--dataset=nope", "--test=row_completion", "--model-name=m")
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
