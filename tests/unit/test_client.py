"""The model wrapper: cache hits, retries with backoff and Retry-After, failures as records."""

from tabmem.errors import RetryPolicy, TransientProviderError
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel


class ScriptedBackend:
    """Answers from a script: an exception instance is raised, a string is returned."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = 0
        self.identity = {"provider": "scripted", "model": "s"}

    def _next(self):
        self.calls += 1
        item = self.script.pop(0) if self.script else "done"
        if isinstance(item, Exception):
            raise item
        return item

    def chat(self, messages, params):
        return self._next()

    def complete(self, prompt, params):
        return self._next()

    def count_tokens(self, text):
        return None

    def close(self):
        pass


def request(i=0):
    return Request(params=GenerationParams(max_tokens=5), prompt=f"p{i}")


def fast_retry(max_retries=3):
    return RetryPolicy(max_retries=max_retries, base_delay=0.001, max_delay=0.01)


def test_transient_errors_are_retried_then_answered(tmp_path):
    backend = ScriptedBackend([TransientProviderError("429"), TransientProviderError("500"), "ok"])
    model = LanguageModel(backend, "s", retry=fast_retry(), show_progress=False)
    [response] = model.run([request()])
    assert response.text == "ok" and response.error is None
    assert backend.calls == 3
    assert model.stats.retries == 2 and model.stats.model_calls == 3


def test_gives_up_after_max_retries_without_raising():
    backend = ScriptedBackend([TransientProviderError("500")] * 5)
    model = LanguageModel(backend, "s", retry=fast_retry(2), show_progress=False)
    [response] = model.run([request()])
    assert response.error is not None and "gave up after 3 tries" in response.error
    assert backend.calls == 3


def test_other_errors_become_failed_queries():
    backend = ScriptedBackend([ValueError("garbled JSON"), "fine"])
    model = LanguageModel(backend, "s", retry=fast_retry(), show_progress=False)
    responses = model.run([request(0), request(1)])
    assert "garbled JSON" in responses[0].error
    assert responses[1].text == "fine"


def test_retry_after_is_obeyed_when_longer_than_backoff():
    policy = RetryPolicy(base_delay=0.001, max_delay=0.01)
    assert policy.delay(0, retry_after=2.5) == 2.5
    assert policy.delay(3, retry_after=None) <= 0.01


def test_second_run_is_served_from_cache(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    backend = ScriptedBackend(["a", "b"])
    first = LanguageModel(backend, "s", cache=cache, show_progress=False)
    assert [r.text for r in first.run([request(0), request(1)])] == ["a", "b"]
    second = LanguageModel(backend, "s", cache=cache, show_progress=False)
    again = second.run([request(0), request(1)])
    assert [r.text for r in again] == ["a", "b"] and all(r.cached for r in again)
    assert backend.calls == 2 and second.stats.model_calls == 0


def test_failed_answers_are_not_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    backend = ScriptedBackend([ValueError("boom"), "later"])
    model = LanguageModel(backend, "s", cache=cache, show_progress=False)
    assert model.run([request()])[0].error
    assert model.run([request()])[0].text == "later"


def test_concurrent_run_keeps_request_order():
    backend = ScriptedBackend([])
    backend.chat = lambda messages, params: messages[0]["content"]
    model = LanguageModel(backend, "s", max_concurrency=8, show_progress=False)
    reqs = [
        Request(
            params=GenerationParams(max_tokens=1),
            messages=({"role": "user", "content": str(i)},),
        )
        for i in range(50)
    ]
    assert [r.text for r in model.run(reqs)] == [str(i) for i in range(50)]


def test_a_refused_model_stops_its_remaining_queries():
    from tabmem.errors import ProviderError

    backend = ScriptedBackend([ProviderError("Model 's' was refused (HTTP 401).")])
    model = LanguageModel(backend, "s", retry=fast_retry(), show_progress=False)
    responses = model.run([request(0), request(1), request(2)])
    assert backend.calls == 1
    assert "refused" in responses[0].error
    assert all(r.error.startswith("not sent: ") for r in responses[1:])
    assert model.stats.model_calls == 1 and model.stats.failures == 3


def test_equal_requests_in_a_batch_are_sent_once():
    backend = ScriptedBackend(["a", "b"])
    model = LanguageModel(backend, "s", show_progress=False)
    responses = model.run([request(0), request(1), request(0)])
    assert [r.text for r in responses] == ["a", "b", "a"]
    assert [r.cached for r in responses] == [False, False, True]
    assert backend.calls == 2 and model.stats.cache_hits == 1


def test_empty_answers_are_counted_and_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    backend = ScriptedBackend([""])
    model = LanguageModel(backend, "s", cache=cache, show_progress=False)
    assert model.run([request()])[0].text == ""
    again = model.run([request()])[0]
    assert again.cached and again.text == "" and again.error is None
    assert backend.calls == 1 and model.stats.empty_answers == 2


def test_retry_after_is_read_in_seconds_milliseconds_or_as_a_date():
    from email.utils import formatdate

    from tabmem.llm.litellm_backend import retry_after_seconds

    assert retry_after_seconds({"Retry-After": "2.5"}) == 2.5
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"Retry-After": formatdate(1000.0 + 30, usegmt=True)}, 1000.0) == 30
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None
