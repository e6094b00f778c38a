"""Reasoning models over real HTTP: the memorizer oracle thinking before it answers.

The oracle server on 127.0.0.1 serves ``oracle-memorizer+think`` (a ``<think>`` block in the
text, stop sequences and max_tokens applied to the whole generation, as a server without a
reasoning parser does) and ``oracle-memorizer+reason`` (the thoughts in ``reasoning_content``).
A sweep of the four memorization tests on iris and titanic gives each reasoning model the
verdicts of the plain memorizer, and so does the same thinking server configured as a plain
model under a name tabmem does not know (its first reply shows the thoughts).
The thoughts are in each run's query table and traces, and their tokens in its metrics.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from flaky_grid import mlflow_runs, sweep_here, write_model_config
from harness import ONE_PROCESS
from mlflow.tracking import MlflowClient

from tabmem.data import dataset_specs, load_dataset
from tabmem.llm.oracle import OracleServer
from tabmem.llm.oracle.server import THOUGHTS

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic")

EXPERIMENT = "reasoning"
MODELS = {  # model config name: (served model, reasoning mode in its config)
    "plain": ("oracle-memorizer", None),
    "thinks-inline": ("oracle-memorizer+think", "inline"),
    "thinks-apart": ("oracle-memorizer+reason", "separate"),
    "thinks-unknown": ("oracle-memorizer+think", None),
}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    conf = tmp_path_factory.mktemp("conf")
    outputs = tmp_path_factory.mktemp("outputs")
    datasets = [load_dataset(dataset_specs()[name]) for name in ("iris", "titanic")]
    with OracleServer(datasets) as server:
        for name, (served, mode) in MODELS.items():
            extra = {"reasoning": mode, "reasoning_allowance": 64} if mode else {}
            # no hangs here: a long timeout, so that a busy machine's slow answer is not retried
            # until the query gives up
            write_model_config(conf, name, server.base_url, served=served, timeout=30, **extra)
        result = sweep_here(
            outputs,
            conf,
            EXPERIMENT,
            "-m",
            f"model={','.join(MODELS)}",
            "dataset=iris,titanic",
            "test=memorization",
            ONE_PROCESS,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    runs, client = mlflow_runs(outputs, EXPERIMENT)
    return [r for r in runs if r.data.tags.get("scope") != "dataset"], client, outputs


def _verdicts(runs) -> dict[str, dict[tuple[str, str], str]]:
    found: dict[str, dict[tuple[str, str], str]] = defaultdict(dict)
    for run in runs:
        tags = run.data.tags
        found[tags["model"]][(tags["dataset"], tags["test"])] = tags["verdict"]
    return found


def test_a_reasoning_model_gets_the_verdicts_of_the_same_model_without_thoughts(sweep):
    runs, _, _ = sweep
    verdicts = _verdicts(runs)
    plain = verdicts["plain"]
    assert len(plain) == 8
    for dataset in ("iris", "titanic"):
        for test in ("header", "row_completion", "feature_completion"):
            assert plain[(dataset, test)] == "evidence", (dataset, test)
    assert plain[("iris", "first_token")] == "evidence"
    assert verdicts["thinks-inline"] == plain
    assert verdicts["thinks-apart"] == plain
    assert verdicts["thinks-unknown"] == plain  # found to think by its first reply


def test_the_thoughts_are_in_the_query_table_the_traces_and_the_token_counts(sweep):
    runs, client, outputs = sweep
    for run in runs:
        model = run.data.tags["model"]
        if model not in ("thinks-inline", "thinks-apart") or not run.data.metrics["n_queries"]:
            continue  # (first token does not apply to titanic: no queries)
        metrics = run.data.metrics
        if metrics["model_calls"]:  # first token reuses row completion's answers from the cache
            assert metrics["reasoning_tokens"] > 0, (model, run.data.tags["test"])
        folder = outputs / "downloaded" / run.info.run_id
        folder.mkdir(parents=True)
        local = client.download_artifacts(run.info.run_id, "queries.json", str(folder))
        table = json.loads(Path(local).read_text())
        column = table["columns"].index("reasoning")
        thoughts = {row[column] for row in table["data"]}
        assert thoughts == {THOUGHTS.strip()}, (model, run.data.tags["test"], thoughts)
        traces = MlflowClient(client._tracking_client.tracking_uri).search_traces(
            locations=[run.info.experiment_id], run_id=run.info.run_id, max_results=5
        )
        spans = [t.data.spans[0] for t in traces]
        assert spans and all(s.attributes["reasoning"] == THOUGHTS.strip() for s in spans)
        assert all("<think>" not in str(s.outputs) for s in spans)
