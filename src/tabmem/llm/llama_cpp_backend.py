"""In-process GGUF models through llama-cpp-python (the embedded default model runs here).

Each answer reports its token usage (``take_usage``): prompt and completion tokens, and
``evaluated_tokens``, the tokens llama.cpp actually ran through the model (prompt tokens not
served from its KV cache, plus the generated ones): the figure that sets a local run's time.
A request with a stop rule stops generating as soon as its score is settled.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabmem.errors import ProviderError
from tabmem.llm.base import GenerationParams, Message
from tabmem.llm.stopping import StopRule
from tabmem.llm.weights import sha256_file

if TYPE_CHECKING:
    from tabmem.llm.backends import BuildContext

INSTALL_HINT = (
    'install it with CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "llama-cpp-python>=0.3.16" '
    "(make demo does this)"
)


class LlamaCppBackend:
    """A GGUF model loaded once per process; calls are serialised (llama.cpp is not re-entrant).

    Successive prompts that share a prefix (the few-shot part) reuse llama.cpp's KV cache.
    ``n_threads`` serves both generation and prompt evaluation (None: llama.cpp's defaults,
    which take every core for prompts and so slow down a second model beside this one).
    """

    def __init__(
        self,
        weights: Path,
        name: str,
        context_window: int = 4096,
        n_threads: int | None = None,
        n_batch: int = 512,
    ) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ProviderError(f"Model '{name}' needs llama-cpp-python; {INSTALL_HINT}.") from exc

        class CountingLlama(Llama):
            """Llama that counts, per generation, the prompt's tokens, the tokens it sampled and
            those it evaluated (prompt tokens found in the KV cache are never evaluated)."""

            prompt_tokens = sampled = evaluated = 0

            def generate(self, tokens: Any, *args: Any, **kwargs: Any) -> Any:
                self.prompt_tokens = len(tokens)
                return (yield from super().generate(tokens, *args, **kwargs))

            def sample(self, *args: Any, **kwargs: Any) -> Any:
                self.sampled += 1
                return super().sample(*args, **kwargs)

            def eval(self, tokens: Any) -> None:
                self.evaluated += len(tokens)
                super().eval(tokens)

        self.name = name
        self.weights = Path(weights)
        self._lock = threading.Lock()
        self._usage = threading.local()
        self._llm = CountingLlama(
            model_path=str(self.weights),
            n_ctx=context_window,
            n_threads=n_threads,
            n_threads_batch=n_threads,
            n_batch=n_batch,
            verbose=False,
        )
        self.identity = {
            "provider": "llama_cpp",
            "model": name,
            "weights_sha256": sha256_file(self.weights),
        }

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        with self._lock:
            return self._generate(self._llm.create_chat_completion, params, messages=messages)

    def complete(self, prompt: str, params: GenerationParams) -> str:
        with self._lock:
            return self._generate(self._llm.create_completion, params, prompt=prompt)

    def _generate(self, create: Any, params: GenerationParams, **kwargs: Any) -> str:
        """One generation, keeping its usage. With a stop rule the answer is streamed and the
        stream closed as soon as the text so far settles the score."""
        llm = self._llm
        sampled, evaluated = llm.sampled, llm.evaluated
        rule = params.stop_rule
        out = create(
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            stop=list(params.stop) or None,
            seed=params.seed,
            stream=rule is not None,
            **kwargs,
        )
        text = _text(out) if rule is None else _streamed_until_settled(out, rule)
        self._usage.value = {
            "prompt_tokens": llm.prompt_tokens,
            "completion_tokens": llm.sampled - sampled,
            "evaluated_tokens": llm.evaluated - evaluated,
        }
        return text

    def take_usage(self) -> dict[str, int]:
        """The token usage of this thread's last answer (then forgotten)."""
        usage = getattr(self._usage, "value", None) or {}
        self._usage.value = None
        return usage

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], ctx: BuildContext) -> LlamaCppBackend:
        """The backend a ``backend: llama_cpp`` model config describes; ``n_threads`` null
        takes the runner's share of the cores."""
        return cls(
            weights=ctx.weights(cfg),
            name=cfg["name"],
            context_window=int(cfg.get("context_window", 4096)),
            n_threads=cfg.get("n_threads") or ctx.threads,
        )

    def count_tokens(self, text: str) -> int | None:
        with self._lock:
            return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def tokenize(self, text: str) -> list[str] | None:
        with self._lock:
            ids = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
            pieces = [self._llm.detokenize([i]) for i in ids]
        return [p.decode("utf-8", errors="replace") for p in pieces]

    def close(self) -> None:
        with self._lock:
            self._llm.close()


def _text(out: dict[str, Any]) -> str:
    """The text of a (chat) completion."""
    choice = out["choices"][0]
    return (choice["message"]["content"] if "message" in choice else choice["text"]) or ""


def _streamed_until_settled(chunks: Generator[dict[str, Any], None, None], rule: StopRule) -> str:
    """The streamed text, read until ``rule`` says its score is settled; the stream is then
    closed, which ends llama.cpp's generation."""
    text = ""
    try:
        for chunk in chunks:
            choice = chunk["choices"][0]
            text += (choice["delta"].get("content") if "delta" in choice else choice["text"]) or ""
            if rule.end(text) is not None:
                break
    finally:
        chunks.close()
    return text
