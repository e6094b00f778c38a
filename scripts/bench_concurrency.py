"""Benchmarks 1 and 2: does the harness keep a slow server busy, and is a re-run free?

A local OpenAI-compatible server answers every request in a fixed time (200 ms by default;
``tests/integration/flaky_server.py`` in its own process). The row completion test (``--test``) with
100 queries runs in this process through the real client (litellm, cache, threads) at each
``max_concurrency``, each with a fresh cache; its wall time is compared with the ideal (queries x
latency / concurrency) and with a sequential client (the OpenAI SDK, one request at a time, same
requests). Then the same grid runs again from the caches: its time and model calls.

    python scripts/bench_concurrency.py [--latency 0.2] [--queries 100] [--levels 1,4,16,64]
    python scripts/bench_concurrency.py --smoke    # 8 queries, 20 ms, levels 1 and 4 (seconds)
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import (
    RecordingModel,
    add_smoke_flag,
    print_table,
    recorded_requests,
    sized_test_config,
    start_latency_server,
)

from tabmem.battery.base import TestContext, get_test, registry
from tabmem.data import dataset_specs, load_dataset
from tabmem.llm.base import Request
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.registry import build_model

ACCEPTANCE_LEVEL = 16
ACCEPTANCE_RATIO = 1.25


def model_config(base_url: str, concurrency: int) -> dict[str, Any]:
    return {
        "name": f"latency-c{concurrency}",
        "backend": "litellm",
        "litellm_model": "openai/oracle-memorizer",
        "completion_model": "text-completion-openai/oracle-memorizer",
        "api_base": base_url,
        "prompt_form": "chat",
        "context_window": 100000,
        "max_concurrency": concurrency,
        "timeout": 30,
    }


def timed_test(test: str, dataset: Any, params: dict, model: LanguageModel) -> dict[str, float]:
    """Run the test once; its wall time, the time spent in ``model.run`` and the call counts."""
    spent = {"run": 0.0}
    run = model.run

    def timed_run(requests: list[Request], description: str = "queries") -> list:
        started = time.perf_counter()
        try:
            return run(requests, description)
        finally:
            spent["run"] += time.perf_counter() - started

    model.run = timed_run  # type: ignore[method-assign]
    started = time.perf_counter()
    result = get_test(test)(TestContext(dataset=dataset, model=model, params=params, seed=0))
    wall = time.perf_counter() - started
    return {
        "wall": wall,
        "queries_wall": spent["run"],
        "n_queries": result.n_queries,
        "failed": sum(1 for r in result.records if r.error),
        **model.stats.as_dict(),
    }


def sequential_client(base_url: str, requests: list[Request]) -> float:
    """Seconds for the OpenAI SDK to send the same requests one after another."""
    import openai

    client = openai.OpenAI(api_key="unused", base_url=base_url, max_retries=0, timeout=30)
    client.chat.completions.create(
        model="oracle-memorizer", messages=[{"role": "user", "content": "warm"}], max_tokens=1
    )
    started = time.perf_counter()
    for request in requests:
        p = request.params
        client.chat.completions.create(
            model="oracle-memorizer",
            messages=list(request.messages or ()),
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            seed=p.seed,
            stop=list(p.stop) or None,
        )
    elapsed = time.perf_counter() - started
    client.close()
    return elapsed


def run_level(
    test: str, dataset: Any, params: dict, base_url: str, concurrency: int, cache_path: Path
) -> dict[str, float]:
    cache = ResponseCache(cache_path)
    model = build_model(model_config(base_url, concurrency), cache, Path(), show_progress=False)
    try:
        return timed_test(test, dataset, params, model)
    finally:
        model.close()
        cache.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--levels", default="1,4,16,64")
    parser.add_argument("--test", default="row_completion")
    parser.add_argument("--dataset", default="titanic")
    parser.add_argument("--repeats", type=int, default=3, help="runs per level above 1 (median)")
    add_smoke_flag(parser)
    args = parser.parse_args()
    if args.smoke:
        args.latency, args.queries, args.levels, args.repeats = 0.02, 8, "1,4", 1
    test = args.test if args.test in registry() else "header"
    if test != args.test:
        print(f"test '{args.test}' is not available; benchmarking '{test}' instead")
    levels = [int(v) for v in args.levels.split(",")]
    dataset = load_dataset(dataset_specs()[args.dataset])
    params = sized_test_config(test, args.queries)
    recorder = RecordingModel("chat", 100000)
    requests = recorded_requests(test, dataset, params, recorder)
    process, base_url = start_latency_server(args.latency, args.dataset)
    try:
        with tempfile.TemporaryDirectory() as folder:
            report(args, test, dataset, params, base_url, levels, requests, Path(folder))
    finally:
        process.terminate()
        process.wait()


FRESH_COLUMNS = {
    "concurrency": "concurrency",
    "wall s": "wall",
    "queries s": "queries_wall",
    "ideal s": "ideal",
    "floor s": "floor",
    "wall/ideal": "ratio",
    "queries/ideal": "queries_ratio",
    "wall/sequential": "to_sequential",
    "model calls": "model_calls",
}


def fresh_row(n: int, latency: float, c: int, runs: list[dict], sequential: float) -> dict:
    """The median run of a level, with its ideal, floor and ratios."""
    best = sorted(runs, key=lambda r: r["wall"])[len(runs) // 2]
    ideal = n * latency / c
    return {
        **best,
        "concurrency": c,
        "ideal": ideal,
        "floor": math.ceil(n / c) * latency,
        "ratio": best["wall"] / ideal,
        "queries_ratio": best["queries_wall"] / ideal,
        "to_sequential": best["wall"] / sequential,
    }


def report(args, test, dataset, params, base_url, levels, requests, folder: Path) -> None:
    n = len(requests)
    print(f"{test} test on {args.dataset}: {n} queries, server latency {args.latency:g} s")
    cold = run_level(test, dataset, params, base_url, 64, folder / "warmup.sqlite")
    print(f"first run in this process (imports, file reads; not counted): {cold['wall']:.3f} s")
    sequential = sequential_client(base_url, requests)
    fresh, again = [], []
    for c in levels:
        runs = [
            run_level(test, dataset, params, base_url, c, folder / f"c{c}-{i}.sqlite")
            for i in range(1 if c == 1 else args.repeats)
        ]
        fresh.append(fresh_row(n, args.latency, c, runs, sequential))
        cached = run_level(test, dataset, params, base_url, c, folder / f"c{c}-0.sqlite")
        again.append([c, cached["wall"], cached["model_calls"], cached["cache_hits"]])
    print_table(
        f"1. fresh cache (median of {args.repeats} runs per level above 1)",
        list(FRESH_COLUMNS),
        [[row[key] for key in FRESH_COLUMNS.values()] for row in fresh],
    )
    print(f"sequential client (OpenAI SDK, one request at a time): {sequential:.3f} s")
    print("ideal = queries x latency / concurrency; floor = ceil(queries / concurrency) x latency;")
    print("queries s = time inside model.run; the rest of wall s is the test's own work")
    print_table(
        "2. the same grid again, from the cache",
        ["concurrency", "wall s", "model calls", "cache hits"],
        again,
    )
    at = next((row for row in fresh if row["concurrency"] == ACCEPTANCE_LEVEL), None)
    if at is not None:
        print(
            f"\nacceptance: at concurrency {ACCEPTANCE_LEVEL}, wall/ideal = {at['ratio']:.3f} "
            f"(queries alone {at['queries_ratio']:.3f}); required < {ACCEPTANCE_RATIO}: "
            f"{'PASS' if at['ratio'] < ACCEPTANCE_RATIO else 'FAIL'}"
        )


if __name__ == "__main__":
    main()
