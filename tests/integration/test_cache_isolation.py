"""Cache correctness over real HTTP: answers are shared only by equal models asked equal things.

Two models behind one server, and one model name behind two servers, share a cache file and
never each other's answers; a change of any generation parameter, the seed or the sample index
misses the cache (the server sees the request), and an unchanged request never reaches it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from flaky_server import FlakyServer

from tabmem.data import dataset_specs, load_dataset
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.registry import build_model

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic")


@pytest.fixture(scope="module")
def iris():
    return load_dataset(dataset_specs()["iris"])


@pytest.fixture(scope="module")
def servers(iris) -> Iterator[tuple[FlakyServer, FlakyServer]]:
    """Two servers that answer to the same model name ``m``: one remembers iris, one does not."""
    first = FlakyServer([iris], aliases={"m": "oracle-memorizer"})
    second = FlakyServer([iris], aliases={"m": "oracle-null"})
    with first, second:
        yield first, second


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ResponseCache]:
    shared = ResponseCache(tmp_path / "responses.sqlite")
    yield shared
    shared.close()


def model(cache: ResponseCache, base_url: str, served: str = "m", **extra) -> LanguageModel:
    """A model built from its config the way a grid cell builds it."""
    config = {
        "name": f"model-{served}",
        "backend": "litellm",
        "litellm_model": f"openai/{served}",
        "completion_model": f"text-completion-openai/{served}",
        "api_base": base_url,
        "max_concurrency": 4,
        "timeout": 5,
        **extra,
    }
    return build_model(config, cache, Path("unused"), show_progress=False)


def questions(iris, n: int = 4) -> list[Request]:
    params = GenerationParams(max_tokens=30)
    return [
        Request(params=params, messages=({"role": "user", "content": iris.text[: 80 + 7 * i]},))
        for i in range(n)
    ]


def texts(responses) -> list[str]:
    assert all(r.error is None for r in responses)
    return [r.text for r in responses]


def test_two_models_behind_one_server_never_share_answers(servers, cache, iris):
    server, _ = servers
    start = server.request_count
    memorizer = texts(model(cache, server.base_url, "oracle-memorizer").run(questions(iris)))
    null = model(cache, server.base_url, "oracle-null")
    nulls = texts(null.run(questions(iris)))
    assert server.request_count - start == 8
    assert null.stats.cache_hits == 0
    assert iris.text.startswith(iris.text[:80] + memorizer[0]) and memorizer[0]
    assert memorizer != nulls


def test_one_model_name_at_two_api_bases_never_shares_answers(servers, cache, iris):
    first, second = servers
    at_first = model(cache, first.base_url)
    answers_first = texts(at_first.run(questions(iris)))
    start = second.request_count
    at_second = model(cache, second.base_url)
    answers_second = texts(at_second.run(questions(iris)))
    assert second.request_count - start == 4 and at_second.stats.cache_hits == 0
    assert answers_first != answers_second
    again = model(cache, first.base_url)
    assert texts(again.run(questions(iris))) == answers_first
    assert again.stats.model_calls == 0 and again.stats.cache_hits == 4


def test_a_changed_model_setting_misses_the_cache(servers, cache, iris):
    server, _ = servers
    model(cache, server.base_url).run(questions(iris, 1))
    for extra in (
        {"completion_model": "text-completion-openai/other"},
        {"extra_params": {"presence_penalty": 0.5}},
    ):
        start = server.request_count
        changed = model(cache, server.base_url, **extra)
        changed.run(questions(iris, 1))
        assert server.request_count - start == 1, extra


@pytest.mark.parametrize(
    "change",
    [
        {"max_tokens": 31},
        {"temperature": 0.7},
        {"top_p": 0.9},
        {"stop": ("\n",)},
        {"seed": 1},
        "sample_index",
        "completion_form",
    ],
    ids=str,
)
def test_any_changed_parameter_seed_or_sample_index_misses(servers, cache, iris, change):
    server, _ = servers
    [base] = questions(iris, 1)
    if change == "sample_index":
        changed = replace(base, sample_index=1)
    elif change == "completion_form":
        changed = Request(params=base.params, prompt=base.messages[0]["content"])
    else:
        changed = replace(base, params=replace(base.params, **change))
    asker = model(cache, server.base_url)
    asker.run([base])
    start = server.request_count
    asker.run([changed])
    assert server.request_count - start == 1
    asker.run([base, changed])
    assert server.request_count - start == 1
    assert asker.stats.cache_hits == 2


def test_equal_requests_in_one_batch_are_sent_once(servers, cache, iris):
    server, _ = servers
    [question] = questions(iris, 1)
    start = server.request_count
    asker = model(cache, server.base_url, served="oracle-null")
    responses = asker.run([question, replace(question, params=replace(question.params)), question])
    assert server.request_count - start == 1
    assert len({r.text for r in responses}) == 1
    assert [r.cached for r in responses] == [False, True, True]
