"""A served model scores text for real (slow): SmolLM2 behind a vLLM-like server process (its
own process, on a free port) gives the transformers backend's log-probabilities on the same
weights, and ``model=llama-70b`` pointed at it runs the likelihood suite."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from integration.vllm_server import served, smollm2_weights
from unit.tiny_model import save_tiny_model

import tabmem
from tabmem.llm.backends import BuildContext
from tabmem.llm.litellm_backend import LiteLLMBackend
from tabmem.paths import conf_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SERVED = "smollm2"
BOS = "<|im_start|>"  # SmolLM2's BOS, which its tokenizer adds to no prompt
AS_SERVED = {
    "model.litellm_model": f"openai/{SERVED}",
    "model.completion_model": f"text-completion-openai/{SERVED}",
    "+model.bos_token": BOS,
}
SCORED = ("min_k_prob", "reference_ratio", "zlib_ratio", "likelihood_inference")
# 20 rows (the learned test's minimum), each after the header and the two rows before it
SMALL = {
    f"test.{t}.{key}": value
    for t in (*SCORED, "min_k_plus_plus")
    for key, value in (("n_rows", 20), ("window_tokens", 0), ("context_rows", 2))
}


@pytest.fixture(scope="module")
def api_base(tmp_path_factory):
    with served(SERVED, tmp_path_factory.mktemp("server") / "server.log") as url:
        yield url


def llama_70b_at(api_base: str, shape: str) -> LiteLLMBackend:
    """``conf/model/llama-70b.yaml`` pointed at the server, with the reply shape ``shape``."""
    cfg = yaml.safe_load((conf_dir() / "model" / "llama-70b.yaml").read_text())
    cfg.update(
        {key.removeprefix("+model.").removeprefix("model."): v for key, v in AS_SERVED.items()}
    )
    cfg.update(api_base=api_base, prompt_logprobs=shape)
    return LiteLLMBackend.from_config(cfg, BuildContext(Path("unused")))


def test_served_log_probabilities_are_the_transformers_backends_on_the_same_weights(api_base):
    from tabmem.data import dataset_specs, load_dataset
    from tabmem.llm.transformers_backend import TransformersBackend

    iris = load_dataset(dataset_specs()["iris"])
    context = "\n".join(iris.records[:4]) + "\n"
    row = iris.rows[3]
    cut = row.index(",", row.index(",") + 1) + 1  # a context that ends inside a row
    items = [
        (context, iris.rows[4] + "\n"),
        (context, iris.rows[5] + "\n"),
        ("", iris.header + "\n"),
        (context + row[:cut], row[cut:] + "\n"),
    ]
    local = TransformersBackend(smollm2_weights(), "smollm2-135m-hf", device="cpu", threads=1)
    try:
        expected = local.logprobs_batch(items)
    finally:
        local.close()
    gaps = []
    for shape in ("echo", "vllm"):
        backend = llama_70b_at(api_base, shape)
        try:
            scored = backend.logprobs_batch(items)
        finally:
            backend.close()
        for ours, theirs in zip(scored, expected, strict=True):
            assert len(ours) == len(theirs) > 0
            gaps += [abs(a - b) for a, b in zip(ours, theirs, strict=True)]
    print(f"max |served - transformers| = {max(gaps):.2e} nats over {len(gaps)} tokens")
    assert max(gaps) < 1e-3


def test_llama_70b_on_a_vllm_server_runs_the_likelihood_suite(api_base, tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_API_BASE", api_base)
    reference = {
        "name": "tiny-reference",
        "backend": "transformers",
        "weights": {"path": str(save_tiny_model(tmp_path / "reference", seed=1))},
        "device": "cpu",
        "prompt_form": "completion",
        "context_window": 512,
    }
    reference_yaml = tmp_path / "tiny-reference.yaml"
    reference_yaml.write_text(yaml.safe_dump(reference))
    results = tabmem.run(
        "llama-70b",
        "iris",
        "likelihood",
        outputs_dir=str(tmp_path / "out"),
        progress=False,
        show_queries=False,
        quiet=True,
        **AS_SERVED,
        **SMALL,
        **{
            f"test.{t}.reference_models": [str(reference_yaml)]
            for t in ("reference_ratio", "likelihood_inference")
        },
    )
    found = {r.test: r for r in results}
    for name in SCORED:
        result = found[name]
        assert result.status == "finished", result.message
        assert result.verdict != "not_applicable", result.reason
        assert 0 < result.p_value <= 1
        assert result.metrics["n_failed_queries"] == 0
    for name in ("reference_ratio", "zlib_ratio", "likelihood_inference"):
        assert found[name].metrics["pairs_scored"] == 20
    # a server gives the log-probabilities of a few tokens at each position, not their spread
    assert found["min_k_plus_plus"].verdict == "not_applicable"
    assert "not its whole distribution" in found["min_k_plus_plus"].reason
