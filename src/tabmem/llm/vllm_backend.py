"""Open models on GPUs with vLLM's offline engine: batched generation and log-probabilities.

One engine per process, split over ``tensor_parallel_size`` GPUs (a 70B model on a 4- or
8-GPU node). Concurrent requests from the client's workers are gathered into one
``generate`` call, which vLLM schedules with continuous batching. vLLM is an optional
extra (``pip install "tabmem[gpu]"``, Linux with an NVIDIA GPU); the OpenAI-compatible vLLM
*server* needs no extra: it is reached through litellm (``model=llama-70b``).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tabmem.errors import ProviderError
from tabmem.llm.base import GenerationParams, Message
from tabmem.llm.transformers_backend import Batcher, weights_fingerprint

if TYPE_CHECKING:
    from tabmem.llm.backends import BuildContext

INSTALL_HINT = (
    'install the GPU extra on a Linux machine with an NVIDIA GPU: pip install "tabmem[gpu]"'
)


def import_vllm(name: str) -> Any:
    """The vllm module, or one sentence saying how to get it."""
    try:
        import vllm
    except ImportError as exc:
        raise ProviderError(
            f"Model '{name}' needs vLLM, which is not installed; {INSTALL_HINT}."
        ) from exc
    return vllm


def prompt_token_logprobs(prompt_logprobs: list[Any] | None, ids: list[int]) -> list[float]:
    """The log-probability vLLM gave each prompt token (the first has none and is skipped).

    ``prompt_logprobs[i]`` maps token ids to objects with a ``logprob``; the prompt's own
    token ``ids[i]`` is always among them.
    """
    if not prompt_logprobs:
        return []
    values = []
    for position, entry in enumerate(prompt_logprobs):
        if entry is None:
            continue
        found = entry[ids[position]]
        values.append(float(getattr(found, "logprob", found)))
    return values


class VLLMBackend:
    """A model in vLLM's offline engine: generation, chat templates and prompt log-probabilities."""

    supports_logprobs = True

    def __init__(
        self,
        model: str,
        name: str,
        context_window: int = 4096,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        tokenizer: str | None = None,
        gpu_memory_utilization: float = 0.9,
        batch_size: int = 64,
        batch_wait_s: float = 0.05,
        seed: int = 0,
        identity_extra: dict[str, str] | None = None,
    ) -> None:
        vllm = import_vllm(name)
        self.name = name
        self.batch_size = batch_size
        self._vllm = vllm
        self._lock = threading.Lock()
        self._llm = vllm.LLM(
            model=model,
            tokenizer=tokenizer,
            tensor_parallel_size=tensor_parallel_size,
            dtype=dtype,
            max_model_len=context_window,
            gpu_memory_utilization=gpu_memory_utilization,
            seed=seed,
            enable_prefix_caching=True,  # a file's passes share their prefixes
        )
        self.tokenizer = self._llm.get_tokenizer()
        self.identity = {"provider": "vllm", "model": model, **(identity_extra or {})}
        self._batcher = Batcher(self._generate_batch, batch_size, batch_wait_s)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], ctx: BuildContext) -> VLLMBackend:
        """The backend a ``backend: vllm`` model config describes: local ``weights`` or a
        ``hf_model`` id already in the node's Hugging Face cache."""
        name = str(cfg["name"])
        weights = ctx.weights(cfg) if cfg.get("weights") else None
        if weights is None and not cfg.get("hf_model"):
            raise ProviderError(f"Model '{name}' needs weights.path or hf_model in its config.")
        identity = {"weights_sha256": weights_fingerprint(weights)} if weights else {}
        if cfg.get("revision"):
            identity["revision"] = str(cfg["revision"])
        return cls(
            model=str(weights or cfg["hf_model"]),
            name=name,
            context_window=int(cfg.get("context_window", 4096)),
            tensor_parallel_size=int(cfg.get("tensor_parallel_size", 1)),
            dtype=str(cfg.get("dtype", "auto")),
            tokenizer=cfg.get("tokenizer"),
            gpu_memory_utilization=float(cfg.get("gpu_memory_utilization", 0.9)),
            batch_size=int(cfg.get("batch_size", 64)),
            identity_extra=identity,
        )

    def _sampling(self, params: GenerationParams, **overrides: Any) -> Any:
        kwargs: dict[str, Any] = {
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stop": list(params.stop) or None,
            "seed": params.seed,
            **overrides,
        }
        return self._vllm.SamplingParams(**kwargs)

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        prompt = self.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=False
        )
        return self._batcher.submit(params, prompt)

    def complete(self, prompt: str, params: GenerationParams) -> str:
        return self._batcher.submit(params, prompt)

    def _generate_batch(self, params: GenerationParams, prompts: list[str]) -> list[str]:
        with self._lock:
            outputs = self._llm.generate(prompts, self._sampling(params), use_tqdm=False)
        return [o.outputs[0].text for o in outputs]

    def logprobs(self, text: str, context: str = "") -> list[float] | None:
        return self.logprobs_batch([(context, text)])[0]

    def logprobs_batch(self, items: list[tuple[str, str]]) -> list[list[float]]:
        """Prompt log-probabilities of context + text, kept for the text's tokens only."""
        encoded = [
            (
                self.tokenizer.encode(c) if c else self._bos(),
                self.tokenizer.encode(t, add_special_tokens=False),
            )
            for c, t in items
        ]
        prompts = [{"prompt_token_ids": c + t} for c, t in encoded]
        sampling = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        with self._lock:
            outputs = self._llm.generate(prompts, sampling, use_tqdm=False)
        result = []
        for (context, text), output in zip(encoded, outputs, strict=True):
            values = prompt_token_logprobs(output.prompt_logprobs, context + text)
            result.append(values[-len(text) :] if text else [])
        return result

    def logprobs_pass(self, requests: list[Any], moments: bool = False) -> list[list[Any]]:
        """Each ``tabmem.llm.passes.PassRequest`` as prompts of one ``generate`` call: its
        pieces as one prompt, whose prompt log-probabilities give every scored piece, and each
        branch as the pieces before its place followed by the branch. The engine's prefix cache
        computes a prefix the prompts share once (it keeps whole blocks of tokens, so a
        branch's last partial block before its place is computed again). vLLM gives the top
        log-probabilities of a prompt's positions, not their moments."""
        if moments:
            raise ValueError("vLLM gives no moments of its distributions")
        prompts: list[list[int]] = []
        plans = []
        for request in requests:
            first = request.pieces[0]
            pieces = [self.tokenizer.encode(first) if first else self._bos()]
            pieces += [
                self.tokenizer.encode(p, add_special_tokens=False) for p in request.pieces[1:]
            ]
            starts = [0]
            for piece in pieces:
                starts.append(starts[-1] + len(piece))
            trunk = [t for piece in pieces for t in piece]
            spans = [(len(prompts), starts[j], starts[j + 1]) for j in request.scored]
            prompts.append(trunk)
            for j, text in request.branches:
                tokens = self.tokenizer.encode(text, add_special_tokens=False)
                spans.append((len(prompts), starts[j], starts[j] + len(tokens)))
                prompts.append(trunk[: starts[j]] + tokens)
            plans.append(spans)
        sampling = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        with self._lock:
            outputs = self._llm.generate(
                [{"prompt_token_ids": p} for p in prompts], sampling, use_tqdm=False
            )
        values = [
            prompt_token_logprobs(o.prompt_logprobs, p)
            for o, p in zip(outputs, prompts, strict=True)
        ]
        # values[k][i] is the log-probability of prompt k's token i + 1 (the first has none)
        return [
            [values[k][max(start, 1) - 1 : end - 1] for k, start, end in spans] for spans in plans
        ]

    def _bos(self) -> list[int]:
        bos = getattr(self.tokenizer, "bos_token_id", None)
        return [bos] if bos is not None else []

    def count_tokens(self, text: str) -> int | None:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def tokenize(self, text: str) -> list[str] | None:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return [self.tokenizer.decode([i]) for i in ids]

    def close(self) -> None:
        with self._lock:
            self._llm = None
            gc.collect()
