from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.cache import ResponseCache, cache_key

A = {"provider": "litellm", "model": "m1", "api_base": "http://127.0.0.1:1/v1"}
PARAMS = GenerationParams(max_tokens=10)
REQ = Request(params=PARAMS, messages=({"role": "user", "content": "hi"},))


def test_key_changes_with_model_api_base_and_every_parameter():
    base = cache_key(A, REQ)
    assert cache_key({**A, "model": "m2"}, REQ) != base
    assert cache_key({**A, "api_base": "http://127.0.0.1:2/v1"}, REQ) != base
    variants = [
        GenerationParams(max_tokens=11),
        GenerationParams(max_tokens=10, temperature=0.5),
        GenerationParams(max_tokens=10, top_p=0.9),
        GenerationParams(max_tokens=10, stop=("\n",)),
        GenerationParams(max_tokens=10, seed=1),
    ]
    keys = {cache_key(A, Request(params=p, messages=REQ.messages)) for p in variants}
    assert base not in keys and len(keys) == len(variants)
    assert cache_key(A, Request(params=PARAMS, messages=REQ.messages, sample_index=1)) != base
    assert cache_key(A, Request(params=PARAMS, prompt="hi")) != base


def test_key_is_stable_for_equal_requests():
    same = Request(
        params=GenerationParams(max_tokens=10), messages=({"role": "user", "content": "hi"},)
    )
    assert cache_key(dict(A), same) == cache_key(A, REQ)


def test_cache_persists_across_instances(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    cache.put("k", "m1", "answer")
    cache.close()
    reopened = ResponseCache(path)
    assert reopened.get("k") == "answer"
    assert reopened.get("missing") is None
    assert len(reopened) == 1
