"""In-process GGUF models through llama-cpp-python (the embedded default model runs here)."""

from __future__ import annotations

import threading
from pathlib import Path

from tabmem.errors import ProviderError
from tabmem.llm.base import GenerationParams, Message
from tabmem.llm.weights import sha256_file

INSTALL_HINT = (
    'install it with CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "llama-cpp-python>=0.3.16" '
    "(make demo does this)"
)


class LlamaCppBackend:
    """A GGUF model loaded once per process; calls are serialised (llama.cpp is not re-entrant).

    Successive prompts that share a prefix (the few-shot part) reuse llama.cpp's KV cache.
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
        self.name = name
        self.weights = Path(weights)
        self._lock = threading.Lock()
        self._llm = Llama(
            model_path=str(self.weights),
            n_ctx=context_window,
            n_threads=n_threads,
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
            out = self._llm.create_chat_completion(
                messages=messages,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                stop=list(params.stop) or None,
                seed=params.seed,
            )
        return out["choices"][0]["message"]["content"] or ""

    def complete(self, prompt: str, params: GenerationParams) -> str:
        with self._lock:
            out = self._llm.create_completion(
                prompt=prompt,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                stop=list(params.stop) or None,
                seed=params.seed,
            )
        return out["choices"][0]["text"] or ""

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
