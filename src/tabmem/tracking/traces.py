"""Every query of a cell as an MLflow trace of its run, with its expected text and its score.

One trace per ``QueryRecord``: a single LLM span whose inputs are the prompt (or the chat
messages) and whose output is the completion; the expected text is an *expectation* and the
score a *feedback* (MLflow's assessments), so the UI's trace views list and filter queries by
score (``feedback.score > 0``). The traces are written straight to the tracking store, one
``start_trace`` (trace, tags, run link and both assessments in one transaction) per query and
one ``log_spans`` for the whole cell, without MLflow's live tracer: the queries were answered
before, and the live path costs several transactions per query (docs/ui.md).
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from collections import defaultdict, deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tabmem.llm.client import Answered
    from tabmem.results import QueryRecord

PREVIEW_CHARS = 1000  # MLflow's own limit for a trace's request and response previews
SPAN_TYPE = "LLM"


@dataclass
class QueryLog:
    """A test's queries as the run logs them: its records, the model calls behind them, the
    cell's tags (model, dataset, test, transform) and the test's wall-clock window (ns)."""

    records: Sequence[QueryRecord]
    cell_tags: Mapping[str, str]
    window_ns: tuple[int, int]
    answered: Sequence[Answered] = field(default_factory=list)


@dataclass(frozen=True)
class TraceBatch:
    """The traces of one run, ready for the store: trace infos and their spans."""

    infos: list[Any]
    spans: list[Any]


def match_answers(
    records: Sequence[QueryRecord], answered: Sequence[Answered]
) -> list[Answered | None]:
    """The model call behind each record (same prompt text, in order), or None when there is
    none (a log-probability query, or a prompt the test rewrote before recording it)."""
    queues: dict[str, deque[Answered]] = defaultdict(deque)
    for item in answered:
        queues[item.request.as_text()].append(item)
    return [queues[r.prompt].popleft() if queues[r.prompt] else None for r in records]


def build_traces(log: QueryLog, experiment_id: str, run_id: str) -> TraceBatch:
    """One trace per record, linked to ``run_id``; a query without a model call behind it (a
    log-probability query) is stamped with the test's window."""
    from mlflow.entities import (
        AssessmentSource,
        Expectation,
        Feedback,
        TraceInfo,
        TraceLocation,
        TraceState,
    )
    from mlflow.entities.span import Span
    from mlflow.tracing.constant import SpanAttributeKey, TraceMetadataKey, TraceTagKey

    records, cell_tags = log.records, log.cell_tags
    source = AssessmentSource(source_type="CODE", source_id=f"tabmem.{cell_tags['test']}")
    location = TraceLocation.from_experiment_id(experiment_id)
    infos, spans = [], []
    for index, (record, call) in enumerate(
        zip(records, match_answers(records, log.answered), strict=True)
    ):
        otel_trace_id = uuid.uuid4().int
        trace_id = f"tr-{otel_trace_id:032x}"
        start, end = (call.started_ns, call.ended_ns) if call else log.window_ns
        inputs = _inputs(record, call)
        attributes = {
            **cell_tags,
            "query_index": index,
            **(
                {"sample_index": call.request.sample_index, "cached": call.response.cached}
                if call
                else {}
            ),
            **({"reasoning": call.response.reasoning} if call and call.response.reasoning else {}),
            **({"error": record.error} if record.error else {}),
            **{f"extra.{k}": v for k, v in record.extra.items() if _scalar(v)},
        }
        span_attributes = {
            SpanAttributeKey.REQUEST_ID: trace_id,
            SpanAttributeKey.SPAN_TYPE: SPAN_TYPE,
            SpanAttributeKey.INPUTS: inputs,
            SpanAttributeKey.OUTPUTS: record.completion,
            **attributes,
        }
        spans.append(
            Span.from_dict(
                {
                    "trace_id": _b64(otel_trace_id, 16),
                    "span_id": _b64(random.getrandbits(63) + 1, 8),
                    "parent_span_id": None,
                    "name": f"{cell_tags['test']} query {index}",
                    "start_time_unix_nano": start,
                    "end_time_unix_nano": end,
                    "status": {
                        "code": "STATUS_CODE_ERROR" if record.error else "STATUS_CODE_OK",
                        "message": record.error or "",
                    },
                    "attributes": {k: json.dumps(v) for k, v in span_attributes.items()},
                    "events": [],
                }
            )
        )
        tags = {key: str(attributes[key]) for key in (*cell_tags, "cached") if key in attributes}
        infos.append(
            TraceInfo(
                trace_id=trace_id,
                trace_location=location,
                request_time=start // 1_000_000,
                execution_duration=max(0, (end - start) // 1_000_000),
                state=TraceState.ERROR if record.error else TraceState.OK,
                request_preview=_preview(_request_text(record, call)),
                response_preview=_preview(record.completion),
                trace_metadata={TraceMetadataKey.SOURCE_RUN: run_id},
                tags={**tags, TraceTagKey.TRACE_NAME: f"{cell_tags['test']} query {index}"},
                assessments=[
                    Expectation(
                        name="expected", value=record.expected, source=source, trace_id=trace_id
                    ),
                    Feedback(
                        name="score",
                        value=float(record.score),
                        rationale=record.error or None,
                        source=source,
                        trace_id=trace_id,
                    ),
                ],
            )
        )
    return TraceBatch(infos, spans)


def write_traces(tracking_uri: str, experiment_id: str, batch: TraceBatch) -> None:
    """Store a run's traces: one transaction per trace, then every span in one."""
    from mlflow.tracing.client import TracingClient

    client = TracingClient(tracking_uri)
    with _experiment_read_once(client.store, experiment_id):
        for info in batch.infos:
            client.start_trace(info)
    if batch.spans:
        client.log_spans(experiment_id, batch.spans)


@contextmanager
def _experiment_read_once(store: Any, experiment_id: str) -> Iterator[None]:
    """MLflow's SQL store reads the experiment again for every trace it starts (its own
    session, about 40 % of a trace's cost on SQLite); within one run's batch the experiment
    cannot change, so the store answers those reads from one read. Stores that do not read
    it per trace are unaffected."""
    experiment = store.get_experiment(experiment_id)
    read = store.get_experiment
    store.get_experiment = lambda wanted: experiment if wanted == experiment_id else read(wanted)
    try:
        yield
    finally:
        del store.get_experiment


def _inputs(record: QueryRecord, call: Answered | None) -> dict[str, Any]:
    if call is not None and call.request.messages is not None:
        return {"messages": [dict(m) for m in call.request.messages]}
    if call is not None and call.request.prompt is not None:
        return {"prompt": call.request.prompt}
    return {"prompt": record.prompt}


def _request_text(record: QueryRecord, call: Answered | None) -> str:
    """What the list of traces shows as the request: the last user message, or the prompt."""
    if call is not None and call.request.messages:
        users = [m["content"] for m in call.request.messages if m.get("role") == "user"]
        return users[-1] if users else call.request.messages[-1]["content"]
    return record.prompt


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 3] + "..."


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def _b64(number: int, size: int) -> str:
    return base64.b64encode(number.to_bytes(size, "big")).decode()
