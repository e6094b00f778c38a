"""Benchmark: how fast the likelihood tests score a file, against the model's own limit.

1. The raw forward-pass rate: one plain causal pass of the model (``smollm2-135m-hf`` by
   default) over a stretch of the file as long as a pass's window, with the output head and
   the log-softmax at every position: tokens a second. No scoring can beat it by much.
2. The scoring rate: the passes the twin tests read (every row of ``--dataset`` and the twin's
   row at its place, ``battery.file_pass``), scored without a cache, plain and with the
   moments Min-K%++ needs: the tokens scored (real and twin rows) a second, beside the old
   per-row scoring (each pair with its own copy of the header and five rows) on a few pairs.
3. The whole suite: ``tabmem run model=… dataset=… test=likelihood`` in a fresh outputs folder
   (every test of the suite, the reference model included), for each of ``--suite`` (wine:
   all 178 rows; adult: capped at 1,000 of its 32,561), wall and CPU seconds.

    python scripts/bench_likelihood.py [--threads 2] [--suite wine adult]
    python scripts/bench_likelihood.py --smoke   # 10 rows, no suite: about a minute
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import ROOT, add_smoke_flag, composed_test_config, print_table
from omegaconf import OmegaConf

from tabmem.api import compose_config
from tabmem.battery.file_pass import RowTexts, read_file, token_counter
from tabmem.data import dataset_specs, load_dataset
from tabmem.data.twin import twin_of
from tabmem.llm.client import LanguageModel
from tabmem.llm.logprobs import ScoreRequest
from tabmem.llm.passes import score_passes
from tabmem.llm.registry import build_model


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(action):
    wall, cpu = time.perf_counter(), cpu_seconds()
    out = action()
    return out, time.perf_counter() - wall, cpu_seconds() - cpu


def model_of(name: str, outputs: Path, threads: int | None) -> LanguageModel:
    cfg = OmegaConf.to_container(compose_config([f"model={name}"]).model, resolve=True)
    if threads:
        cfg["n_threads"] = threads
    return build_model(cfg, None, outputs / "weights", show_progress=False, threads=threads)


def raw_rate(model: LanguageModel, text: str, tokens: int) -> tuple[int, float, float]:
    """One plain forward pass over ``tokens`` tokens of ``text``, with the head and the
    log-softmax at every position: (tokens, wall s, CPU s); the best of two."""
    backend = model.backend
    torch = backend._torch
    ids = backend._context_ids(text)[:tokens]
    batch = torch.tensor([ids], device=backend._device)

    def forward() -> None:
        with torch.no_grad():
            states = backend.model.base_model(input_ids=batch).last_hidden_state[0]
            step = max(16, (1 << 24) // int(backend.model.get_output_embeddings().weight.shape[0]))
            for at in range(0, len(ids), step):
                torch.log_softmax(backend._head(states[at : at + step]).float(), dim=-1)
        if batch.is_cuda:  # the kernels run after the call returns: wait for them
            torch.cuda.synchronize()

    runs = [timed(forward) for _ in range(2)]
    _, wall, cpu = min(runs, key=lambda r: r[1])
    return len(ids), wall, cpu


def scoring(model: LanguageModel, dataset, rows: int, window: int, moments: bool):
    """Every row (up to ``rows``) and its twin row scored in passes: (tokens, wall, CPU)."""
    twin = twin_of(dataset, 0)
    items = [RowTexts(r, (twin.rows[r],)) for r in range(min(rows, len(dataset.rows)))]
    read = read_file(dataset, items, token_counter(model), window, context_rows=5)
    scores, wall, cpu = timed(lambda: score_passes(model, read.passes, "bench", moments))
    tokens = sum(len(r.logprobs) for answers in scores for r in answers)
    failed = [r.error for answers in scores for r in answers if r.error]
    if failed:
        raise SystemExit(f"scoring failed: {failed[0]}")
    return tokens, wall, cpu, len(read.passes)


def per_row(model: LanguageModel, dataset, pairs: int):
    """The old reading: each pair with its own copy of the header and five rows."""
    twin = twin_of(dataset, 0)
    requests = []
    for r in range(5, 5 + pairs):
        context = dataset.header + "\n" + "".join(x + "\n" for x in dataset.rows[r - 5 : r])
        requests += [ScoreRequest(dataset.rows[r], context), ScoreRequest(twin.rows[r], context)]
    scores, wall, cpu = timed(lambda: model.logprobs(requests, "bench"))
    return sum(len(s.logprobs) for s in scores), wall, cpu


def suite(model: str, dataset: str, threads: int | None) -> tuple[float, float, str]:
    """``tabmem run`` of the likelihood suite in a fresh outputs folder: wall, CPU, summary."""
    with tempfile.TemporaryDirectory(prefix="bench-likelihood-") as outputs:
        command = [
            str(Path(sys.executable).parent / "tabmem"),
            "run",
            f"model={model}",
            f"dataset={dataset}",
            "test=likelihood",
            f"outputs_dir={outputs}",
        ]
        if threads:
            command.append(f"+model.n_threads={threads}")
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        result, wall, cpu = timed(
            lambda: subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        )
        if result.returncode:
            raise SystemExit(f"the suite failed on {dataset}:\n{result.stderr[-3000:]}")
        lines = [line for line in result.stdout.splitlines() if "likelihood" in line.lower()]
        return wall, cpu, "\n".join(lines[-8:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-hf")
    parser.add_argument("--dataset", default="wine")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument("--suite", nargs="*", default=["wine", "adult"])
    add_smoke_flag(parser)
    args = parser.parse_args()
    window = int(composed_test_config("zlib_ratio")["window_tokens"])
    rows = 10 if args.smoke else 100_000
    model = model_of(args.model, ROOT / "outputs", args.threads)
    data = load_dataset(dataset_specs()[args.dataset])
    table = []
    n, wall, cpu = raw_rate(model, data.text, 256 if args.smoke else window)
    table.append(["raw forward pass (head and log-softmax at every token)", n, wall, cpu])
    for moments in (False, True):
        tokens, wall, cpu, passes = scoring(model, data, rows, window, moments)
        what = "with moments (Min-K%++)" if moments else "plain"
        table.append([f"file passes, {what}: {passes} passes", tokens, wall, cpu])
    tokens, wall, cpu = per_row(model, data, 2 if args.smoke else 10)
    table.append(["each pair with its own context (the old reading)", tokens, wall, cpu])
    model.close()
    raw = table[0][1] / table[0][2]
    print_table(
        f"Likelihood scoring: {args.model} on {args.dataset} (window {window} tokens, "
        f"{os.cpu_count()} CPUs, torch threads {args.threads or 'all'})",
        ["what", "tokens", "wall s", "CPU s", "tokens/s (wall)", "vs raw"],
        [
            [what, n, f"{w:.1f}", f"{c:.1f}", f"{n / w:.0f}", f"{(n / w) / raw:.2f}"]
            for what, n, w, c in table
        ],
    )
    if args.smoke or not args.suite:
        return
    rows_out = []
    for name in args.suite:
        wall, cpu, summary = suite(args.model, name, args.threads)
        rows_out.append([name, f"{wall:.0f}", f"{cpu:.0f}"])
        print(summary)
    print_table(
        f"test=likelihood, {args.model}, a fresh outputs folder (reference model included)",
        ["dataset", "wall s", "CPU s"],
        rows_out,
    )


if __name__ == "__main__":
    main()
