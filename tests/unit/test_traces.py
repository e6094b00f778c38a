"""Query traces: each record becomes one trace with its call, expectation and score."""

from __future__ import annotations

import json
import time

from tabmem.cell import Cell
from tabmem.llm.base import GenerationParams, Request, Response
from tabmem.llm.client import Answered
from tabmem.results import QueryRecord
from tabmem.tracking.naming import run_description, run_title
from tabmem.tracking.traces import QueryLog, build_traces, match_answers

PARAMS = GenerationParams(max_tokens=8)
TAGS = {"model": "m", "dataset": "iris", "test": "header", "transform": "original"}


def _answered(request: Request, text: str, cached: bool) -> Answered:
    return Answered(request, Response(text, cached=cached), 1_000_000_000, 1_500_000_000)


def test_records_meet_their_calls_by_prompt_in_order_and_unmatched_ones_get_none():
    chat = Request(PARAMS, messages=({"role": "user", "content": "a,b\n1,"},))
    first = Request(PARAMS, prompt="x", sample_index=0)
    second = Request(PARAMS, prompt="x", sample_index=1)
    calls = [
        _answered(first, "1", True),
        _answered(chat, "2", False),
        _answered(second, "3", False),
    ]
    records = [
        QueryRecord(chat.as_text(), "2", "2", 1.0),
        QueryRecord("x", "1", "1", 1.0),
        QueryRecord("x", "3", "3", 1.0),
        QueryRecord("context only", "real", "", 0.0),
    ]
    matched = match_answers(records, calls)
    assert [m.request.sample_index if m else None for m in matched] == [0, 0, 1, None]
    assert matched[0].request is chat


def test_each_record_is_one_trace_of_the_run_with_expectation_score_and_call_details():
    chat = Request(
        PARAMS, messages=({"role": "system", "content": "s"}, {"role": "user", "content": "q"})
    )
    records = [
        QueryRecord(chat.as_text(), "want", "got", 0.0, error="empty answer"),
        QueryRecord("only a context", "real row", "", 1.0),
    ]
    window = (time.time_ns(), time.time_ns() + 2_000_000)
    log = QueryLog(records, TAGS, window, [_answered(chat, "got", True)])
    batch = build_traces(log, experiment_id="7", run_id="run-1")

    assert len(batch.infos) == len(batch.spans) == 2
    first, second = batch.infos
    assert first.trace_metadata["mlflow.sourceRun"] == "run-1"
    assert {a.name: a.value for a in first.assessments} == {"expected": "want", "score": 0.0}
    assert [a.rationale for a in first.assessments if a.name == "score"] == ["empty answer"]
    assert first.tags["cached"] == "True" and first.tags["dataset"] == "iris"
    assert first.request_preview == "q" and first.response_preview == "got"
    assert first.request_time == 1000 and first.execution_duration == 500
    assert first.state.value == "ERROR"
    span = batch.spans[0]
    assert span.inputs == {"messages": [dict(m) for m in chat.messages]}
    assert span.outputs == "got"
    assert span.attributes["cached"] is True and span.attributes["sample_index"] == 0
    assert span.trace_id == first.trace_id

    assert "cached" not in second.tags
    assert second.request_time == window[0] // 1_000_000
    assert batch.spans[1].inputs == {"prompt": "only a context"}
    assert {a.name: a.value for a in second.assessments}["score"] == 1.0
    assert json.loads(json.dumps(batch.spans[1].to_dict()))["name"] == "header query 1"


def test_run_title_starts_with_the_verdict_and_names_a_transform_other_than_the_original():
    assert run_title(Cell("m", "iris", "header", "original"), "evidence") == (
        "evidence · m · iris · header"
    )
    assert run_title(Cell("m", "iris", "header", "twin"), "no_evidence") == (
        "no_evidence · m · iris · header · twin"
    )


def test_run_description_is_one_paragraph_with_verdict_reason_and_figure():
    text = run_description("evidence", "10 rows after the cut", "4/4 (p=0.01)")
    assert text == "**evidence**: 10 rows after the cut. Hits: 4/4 (p=0.01)."
    assert "\n" not in text


def test_a_batch_is_written_whole_and_leaves_the_store_as_it_found_it(tmp_path):
    import mlflow
    from mlflow.tracing.client import TracingClient

    from tabmem.tracking.store import TrackingStore
    from tabmem.tracking.traces import write_traces

    store = TrackingStore(
        uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        artifact_root=tmp_path / "artifacts",
        experiment="traces",
        lock_path=tmp_path / "mlflow.lock",
    )
    run = store.client.create_run(store.experiment_id)
    records = [QueryRecord(f"prompt {i}", "1,2\n", "1,2\n", 1.0) for i in range(5)]
    tags = {"model": "m", "dataset": "d", "test": "header", "transform": "original"}
    log = QueryLog(records, tags, (time.time_ns(), time.time_ns()))
    write_traces(
        store.uri, store.experiment_id, build_traces(log, store.experiment_id, run.info.run_id)
    )
    assert "get_experiment" not in vars(TracingClient(store.uri).store)  # read-once undone
    mlflow.set_tracking_uri(store.uri)
    found = mlflow.search_traces(
        locations=[store.experiment_id], run_id=run.info.run_id, return_type="list"
    )
    assert sorted(t.data.spans[0].inputs["prompt"] for t in found) == [r.prompt for r in records]
