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


def _open_and_put(path, barrier, index, errors):
    barrier.wait()
    try:
        cache = ResponseCache(path)
        cache.put(f"key-{index}", "m", "text")
        cache.close()
    except Exception as exc:  # the test reports what a process met
        errors.put(repr(exc))


def test_processes_that_open_a_new_cache_at_once_all_succeed(tmp_path):
    """A grid's first cells open the new cache together (4 Slurm jobs failed one with
    "database is locked"); without the creation lock 12 of 40 tries of this failed."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for attempt in range(10):
        path = tmp_path / str(attempt) / "responses.sqlite"
        barrier, errors = context.Barrier(6), context.Queue()
        workers = [
            context.Process(target=_open_and_put, args=(path, barrier, i, errors)) for i in range(6)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert [w.exitcode for w in workers] == [0] * 6
        assert errors.empty(), errors.get()
        assert len(ResponseCache(path)) == 6
