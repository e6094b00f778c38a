"""The vLLM backend without a GPU: a stand-in ``vllm`` module records what the engine is asked."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace
from typing import ClassVar

import pytest

from tabmem.errors import ProviderError
from tabmem.llm.base import GenerationParams
from tabmem.llm.registry import build_backend
from tabmem.llm.vllm_backend import VLLMBackend, prompt_token_logprobs


class FakeTokenizer:
    bos_token_id = 1

    def encode(self, text, add_special_tokens=True):
        ids = [100 + ord(c) for c in text]
        return [self.bos_token_id, *ids] if add_special_tokens else ids

    def decode(self, ids):
        return "".join(chr(i - 100) for i in ids)

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


class FakeLLM:
    created: ClassVar[list[dict]] = []

    def __init__(self, **kwargs):
        FakeLLM.created.append(kwargs)
        self.calls = []

    def get_tokenizer(self):
        return FakeTokenizer()

    def generate(self, prompts, sampling, use_tqdm=False):
        self.calls.append((prompts, sampling))
        if sampling.kwargs.get("prompt_logprobs") == 0:
            outs = []
            for p in prompts:
                ids = p["prompt_token_ids"]
                entries = [None] + [{i: SimpleNamespace(logprob=-0.5)} for i in ids[1:]]
                outs.append(SimpleNamespace(prompt_logprobs=entries))
            return outs
        return [SimpleNamespace(outputs=[SimpleNamespace(text=f"answer to {p}")]) for p in prompts]


class FakeSampling:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = FakeSampling
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.created = []
    return module


def test_tensor_parallel_size_and_settings_come_from_the_model_config(fake_vllm, tmp_path):
    cfg = {
        "name": "big",
        "backend": "vllm",
        "hf_model": "org/big-model",
        "tensor_parallel_size": 4,
        "dtype": "bfloat16",
        "context_window": 16384,
        "gpu_memory_utilization": 0.85,
    }
    backend = build_backend(cfg, tmp_path)
    [created] = FakeLLM.created
    assert created["tensor_parallel_size"] == 4
    assert created["model"] == "org/big-model"
    assert created["dtype"] == "bfloat16"
    assert created["max_model_len"] == 16384
    assert created["gpu_memory_utilization"] == 0.85
    assert backend.identity == {"provider": "vllm", "model": "org/big-model"}


def test_chat_uses_the_template_and_sampling_parameters(fake_vllm):
    backend = VLLMBackend("m", "m")
    params = GenerationParams(max_tokens=7, temperature=0.5, stop=("\n",), seed=3)
    answer = backend.chat([{"role": "user", "content": "hi"}], params)
    assert answer == "answer to <user>hi<assistant>"
    [(_, sampling)] = backend._llm.calls
    assert sampling.kwargs == {
        "max_tokens": 7,
        "temperature": 0.5,
        "top_p": 1.0,
        "stop": ["\n"],
        "seed": 3,
    }


def test_logprobs_keep_the_texts_tokens_only(fake_vllm):
    backend = VLLMBackend("m", "m")
    values = backend.logprobs_batch([("ab", "xyz"), ("", "q")])
    assert values == [[-0.5] * 3, [-0.5]]  # context 'ab' (with BOS) is not returned
    [(prompts, _)] = backend._llm.calls
    assert prompts[0]["prompt_token_ids"] == [1, 197, 198, 220, 221, 222]
    assert prompts[1]["prompt_token_ids"] == [1, 213]  # BOS gives the first token a prediction


def test_a_pass_is_one_prompt_for_its_pieces_and_one_per_branch(fake_vllm, monkeypatch):
    from tabmem.llm.passes import PassRequest

    def by_token(self, prompts, sampling, use_tqdm=False):
        self.calls.append((prompts, sampling))
        return [
            SimpleNamespace(
                prompt_logprobs=[None]
                + [{i: SimpleNamespace(logprob=-i / 1000)} for i in p["prompt_token_ids"][1:]]
            )
            for p in prompts
        ]

    monkeypatch.setattr(FakeLLM, "generate", by_token)
    backend = VLLMBackend("m", "m")
    assert FakeLLM.created[-1]["enable_prefix_caching"] is True
    request = PassRequest(("h\n", "12", "\n", "34"), (1, 3), ((3, "9"), (1, "5")))
    [answers] = backend.logprobs_pass([request])
    [(prompts, _)] = backend._llm.calls
    ids = [p["prompt_token_ids"] for p in prompts]
    assert ids[0] == [1, 204, 110, 149, 150, 110, 151, 152]  # BOS h newline 1 2 newline 3 4
    assert ids[1] == [1, 204, 110, 149, 150, 110, 157]  # the prefix of row "34", then "9"
    assert ids[2] == [1, 204, 110, 153]
    expected = [[149, 150], [151, 152], [157], [153]]
    assert answers == [[-i / 1000 for i in tokens] for tokens in expected]
    with pytest.raises(ValueError, match="moments"):
        backend.logprobs_pass([request], moments=True)


def test_prompt_token_logprobs_reads_the_prompts_own_tokens():
    entries = [None, {5: SimpleNamespace(logprob=-1.0), 9: SimpleNamespace(logprob=-0.1)}]
    assert prompt_token_logprobs(entries, [1, 5]) == [-1.0]
    assert prompt_token_logprobs(None, [1]) == []


def test_missing_vllm_is_one_sentence(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ProviderError) as error:
        VLLMBackend("m", "vllm-llama-70b")
    message = str(error.value)
    assert message.startswith("Model 'vllm-llama-70b' needs vLLM, which is not installed;")
    assert 'pip install "tabmem[gpu]"' in message
    assert message.count(".") <= 2  # one sentence


def test_a_config_without_weights_or_model_id_is_refused(fake_vllm, tmp_path):
    with pytest.raises(ProviderError, match=r"weights\.path or hf_model"):
        build_backend({"name": "x", "backend": "vllm"}, tmp_path)
