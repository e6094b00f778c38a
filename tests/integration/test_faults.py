"""Fault injection over real HTTP on 127.0.0.1: every fault is survived, nothing is asked twice.

A flaky OpenAI-compatible server (``flaky_server.py`` beside this file) answers as the memorizer
oracle but, by a seeded schedule, answers 429 with Retry-After, 500, hangs past the timeout, drops
the connection, sends an empty or malformed body, or an empty completion. The checks: a grid over it
finishes with every cell logged; retries obey backoff and Retry-After; the server saw exactly
queries + retries requests."""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from flaky_grid import mlflow_runs, run_sweep, write_model_config
from flaky_server import Arrival, Fault, FlakyServer, ScriptedFaults, SeededFaults

from tabmem.data import dataset_specs, load_dataset
from tabmem.errors import RetryPolicy, TransientProviderError
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.client import LanguageModel
from tabmem.llm.litellm_backend import LiteLLMBackend

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic")

TIMEOUT = 3.0  # seconds: long enough that a busy 2-core machine answers every non-hang in time
RETRY_AFTER = 0.3
POLICY = RetryPolicy(max_retries=3, base_delay=0.05, max_delay=0.2)
TRANSIENT = [
    Fault.RATE_LIMIT,
    Fault.SERVER_ERROR,
    Fault.HANG,
    Fault.DROP,
    Fault.EMPTY_BODY,
    Fault.MALFORMED_JSON,
]
RATES = {
    Fault.RATE_LIMIT: 0.1,
    Fault.SERVER_ERROR: 0.1,
    Fault.HANG: 0.05,
    Fault.DROP: 0.1,
    Fault.EMPTY_BODY: 0.08,
    Fault.MALFORMED_JSON: 0.08,
    Fault.EMPTY_COMPLETION: 0.05,
}
SLACK = 0.02  # seconds: clocks of the client and the server's arrival log differ this much


@pytest.fixture(scope="module")
def datasets():
    specs = dataset_specs()
    return [load_dataset(specs[name]) for name in ("iris", "titanic")]


@pytest.fixture
def server(datasets) -> Iterator[FlakyServer]:
    with FlakyServer(
        datasets, retry_after=RETRY_AFTER, hang_seconds=8, default_model="oracle-memorizer"
    ) as running:
        yield running


def model_for(server: FlakyServer, concurrency: int = 1, transport: str = "auto") -> LanguageModel:
    """A model at the server, over the direct HTTP path (``auto``) or through litellm."""
    backend = LiteLLMBackend(
        model="openai/m",
        completion_model="text-completion-openai/m",
        name="flaky",
        api_base=server.base_url,
        timeout=TIMEOUT,
        transport=transport,
    )
    return LanguageModel(
        backend, "flaky", max_concurrency=concurrency, retry=POLICY, show_progress=False
    )


def csv_requests(text: str, n: int, chat: bool) -> list[Request]:
    """``n`` distinct continuation requests over the beginning of ``text``."""
    params = GenerationParams(max_tokens=20)
    if chat:
        return [
            Request(params=params, messages=({"role": "user", "content": text[: 60 + i]},))
            for i in range(n)
        ]
    return [Request(params=params, prompt=text[: 60 + i]) for i in range(n)]


def by_key(arrivals: list[Arrival]) -> dict[str, list[Arrival]]:
    grouped: dict[str, list[Arrival]] = defaultdict(list)
    for arrival in arrivals:
        grouped[arrival.key].append(arrival)
    return grouped


TRANSPORTS = pytest.mark.parametrize("transport", ["auto", "litellm"])


@TRANSPORTS
@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completion"])
@pytest.mark.parametrize("fault", TRANSIENT, ids=[f.value for f in TRANSIENT])
def test_each_transient_fault_is_retried_once_and_then_answered(
    server, datasets, fault, chat, transport
):
    server.schedule = ScriptedFaults([fault])
    model = model_for(server, transport=transport)
    [response] = model.run(csv_requests(datasets[0].text, 1, chat))
    assert response.error is None
    assert response.text and datasets[0].text.startswith(datasets[0].text[:60] + response.text)
    assert [a.fault for a in server.arrivals] == [fault, None]
    assert model.stats.model_calls == 2 and model.stats.retries == 1


@TRANSPORTS
def test_an_empty_completion_is_an_answer_not_retried(server, datasets, transport):
    server.schedule = ScriptedFaults([Fault.EMPTY_COMPLETION])
    model = model_for(server, transport=transport)
    responses = model.run(csv_requests(datasets[0].text, 1, True))
    responses += model.run(csv_requests(datasets[0].text, 1, False))
    assert [(r.text, r.error) for r in responses] == [("", None), ("", None)]
    assert server.request_count == 2
    assert model.stats.as_dict()["empty_answers"] == 2 and model.stats.retries == 0


@TRANSPORTS
def test_retries_wait_for_retry_after_then_back_off_exponentially(server, datasets, transport):
    server.schedule = ScriptedFaults([Fault.RATE_LIMIT, Fault.SERVER_ERROR, Fault.DROP])
    model = model_for(server, transport=transport)
    [response] = model.run(csv_requests(datasets[0].text, 1, True))
    assert response.error is None
    times = [a.at for a in server.arrivals]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == 3
    assert gaps[0] >= RETRY_AFTER - SLACK
    # backoff after attempt n is base * 2**n, times a jitter factor in [0.5, 1]
    assert gaps[1] >= POLICY.base_delay * 2 * 0.5 - SLACK
    assert gaps[2] >= POLICY.base_delay * 4 * 0.5 - SLACK


def test_a_hang_costs_the_timeout_and_is_retried(server, datasets):
    server.schedule = ScriptedFaults([Fault.HANG])
    model = model_for(server)
    started = time.monotonic()
    [response] = model.run(csv_requests(datasets[0].text, 1, True))
    assert response.error is None
    first, second = server.arrivals
    assert second.at - first.at >= TIMEOUT
    assert time.monotonic() - started < TIMEOUT + 2


def test_a_query_that_never_succeeds_gives_up_after_max_retries(server, datasets):
    server.schedule = ScriptedFaults([Fault.SERVER_ERROR] * 10)
    model = model_for(server)
    [response] = model.run(csv_requests(datasets[0].text, 1, True))
    assert "gave up after 4 tries" in (response.error or "")
    assert server.request_count == 4 == model.stats.model_calls


@TRANSPORTS
def test_seeded_faults_over_many_queries_count_exactly(server, datasets, transport):
    server.schedule = SeededFaults(seed=3, rates=RATES, max_faults=2)
    model = model_for(server, concurrency=8, transport=transport)
    requests = csv_requests(datasets[1].text, 30, True) + csv_requests(datasets[0].text, 30, False)
    responses = model.run(requests)
    assert all(r.error is None for r in responses)
    met = server.fault_counts()
    assert set(met) == {f.value for f in RATES} | {"answered"}, met
    stats = model.stats
    assert server.request_count == stats.model_calls == len(requests) + stats.retries
    assert stats.empty_answers == met[Fault.EMPTY_COMPLETION.value]
    for key, arrivals in by_key(server.arrivals).items():
        transient = [a for a in arrivals if a.fault in TRANSIENT]
        assert len(arrivals) == len(transient) + 1, key
        assert arrivals[-1].fault in (None, Fault.EMPTY_COMPLETION)


class TimedBackend:
    """A backend whose first call of prompt ``a`` is rate-limited; it records call times."""

    def __init__(self) -> None:
        self.identity = {"provider": "timed", "model": "t"}
        self.calls: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    def complete(self, prompt, params):
        with self._lock:
            first = not any(p == prompt for p, _ in self.calls)
            self.calls.append((prompt, time.monotonic()))
        if prompt == "a" and first:
            raise TransientProviderError("429", retry_after=0.4)
        time.sleep(0.05)
        return prompt

    def count_tokens(self, text):
        return None

    def close(self):
        pass


def test_retry_after_holds_back_every_worker_of_the_model():
    backend = TimedBackend()
    policy = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.01)
    model = LanguageModel(backend, "t", max_concurrency=2, retry=policy, show_progress=False)
    params = GenerationParams(max_tokens=1)
    responses = model.run([Request(params=params, prompt=p) for p in ("a", "b", "c", "d")])
    assert [r.text for r in responses] == ["a", "b", "c", "d"]
    limited_at = next(t for p, t in backend.calls if p == "a")
    later = [t for p, t in backend.calls if p in ("c", "d")]
    assert all(t - limited_at >= 0.4 - SLACK for t in later), backend.calls


@pytest.fixture(scope="module")
def flaky_sweep(tmp_path_factory, datasets):
    """One sweep: chat and plain-completion models behind seeded faults, and a model whose
    server fails every request."""
    conf = tmp_path_factory.mktemp("conf")
    outputs = tmp_path_factory.mktemp("outputs")
    schedule = SeededFaults(seed=1, rates=RATES, max_faults=2)
    flaky = FlakyServer(datasets, schedule, retry_after=RETRY_AFTER, hang_seconds=8)
    dead = FlakyServer(datasets, ScriptedFaults([Fault.SERVER_ERROR] * 10))
    with flaky, dead:
        write_model_config(conf, "flaky", flaky.base_url)
        write_model_config(conf, "flaky-base", flaky.base_url, prompt_form="completion")
        write_model_config(
            conf, "flaky-dead", dead.base_url, retry={"max_retries": 1, "base_delay": 0.01}
        )
        result = run_sweep(
            outputs,
            conf,
            "faults",
            "-m",
            "model=flaky,flaky-base,flaky-dead",
            "dataset=iris,titanic",
            "test=header",
        )
        yield result, outputs, flaky, dead


def test_the_grid_finishes_and_logs_every_cell(flaky_sweep):
    result, outputs, _, _ = flaky_sweep
    assert result.returncode == 1, result.stderr[-3000:]  # every cell ran; two failed
    assert "4 finished, 0 skipped, 2 failed" in result.stdout
    runs, _ = mlflow_runs(outputs, "faults")
    cells = {(r.data.tags["model"], r.data.tags["dataset"]): r for r in runs}
    assert len(runs) == len(cells) == 6
    for (model, dataset), run in cells.items():
        if model == "flaky-dead":
            assert run.info.status == "FAILED", dataset
            assert "gave up after 2 tries" in run.data.tags["error"]
        else:
            assert run.info.status == "FINISHED", (model, dataset)
            assert run.data.tags["verdict"] == "evidence", (model, dataset)
            assert run.data.metrics["n_queries"] == 4


def test_the_servers_saw_exactly_queries_plus_retries(flaky_sweep):
    _, outputs, flaky, dead = flaky_sweep
    runs, _ = mlflow_runs(outputs, "faults")
    finished = [r for r in runs if r.info.status == "FINISHED"]
    queries = sum(int(r.data.metrics["n_queries"]) for r in finished)
    retries = sum(int(r.data.metrics["retries"]) for r in finished)
    calls = sum(int(r.data.metrics["model_calls"]) for r in finished)
    assert flaky.request_count == calls == queries + retries
    assert retries > 0 and len(set(flaky.fault_counts())) >= 4, flaky.fault_counts()
    assert len({a.key for a in flaky.arrivals}) == queries
    assert dead.request_count == 2 * 4 * 2  # two cells, four queries, two tries each
