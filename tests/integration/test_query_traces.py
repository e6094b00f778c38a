"""A real sweep's runs in MLflow: every query a trace with its score, real times, the verdict
in the run's name and description, an experiment that opens on its runs."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

UI_EXPERIMENT = "ui-test"  # the experiment of the ui_sweep fixture (conftest.py)


@pytest.fixture(scope="module")
def store(ui_sweep):
    uri = f"sqlite:///{ui_sweep / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(UI_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id])
    return client, experiment, {r.data.tags["model"]: r for r in runs}, ui_sweep


def _traces(experiment, run):
    return mlflow.search_traces(
        locations=[experiment.experiment_id], run_id=run.info.run_id, return_type="list"
    )


def test_each_query_is_a_trace_of_its_run_with_prompt_completion_expected_and_score(store):
    client, experiment, runs, outputs = store
    for run in runs.values():
        traces = _traces(experiment, run)
        assert len(traces) == run.data.metrics["n_queries"] == 4
        path = client.download_artifacts(run.info.run_id, "queries.json", str(outputs / "dl"))
        table = json.loads(Path(path).read_text())
        rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
        for trace in traces:
            span = trace.data.spans[0]
            row = rows[span.attributes["query_index"]]
            assert span.outputs == row["completion"]
            assessments = {a.name: a.value for a in trace.info.assessments}
            assert assessments == {"expected": row["expected"], "score": row["score"]}
            assert span.inputs["messages"][-1]["role"] == "user"
            assert span.attributes["dataset"] == "iris" and span.attributes["cached"] is False
            assert trace.info.tags["test"] == "header"


def test_traces_are_searchable_by_score(store):
    _, experiment, runs, _ = store
    hits = mlflow.search_traces(
        locations=[experiment.experiment_id],
        filter_string="feedback.score > 0",
        return_type="list",
    )
    assert {t.info.trace_metadata["mlflow.sourceRun"] for t in hits} == {
        runs["oracle-memorizer"].info.run_id
    }
    assert len(hits) == 4


def test_runs_span_the_cells_real_time_and_show_their_verdict(store):
    _, experiment, runs, _ = store
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    for model, run in runs.items():
        verdict = run.data.tags["verdict"]
        assert verdict == ("evidence" if model == "oracle-memorizer" else "no_evidence")
        assert run.info.run_name == f"{verdict} · {model} · iris · header"
        note = run.data.tags["mlflow.note.content"]
        assert note.startswith(f"**{verdict}**: {run.data.tags['reason']}")
        traces = _traces(experiment, run)
        first = min(t.info.request_time for t in traces)
        last = max(t.info.request_time + t.info.execution_duration for t in traces)
        assert run.info.start_time <= first <= last <= run.info.end_time
