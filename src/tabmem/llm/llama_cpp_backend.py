"""In-process GGUF models through llama.cpp's server engine (the xllamacpp wheel, prebuilt for
CPUs: nothing to compile). The embedded default model runs here.

Requests go to the engine in-process (no HTTP); only tokenization goes through the engine's
own listener on 127.0.0.1, since the wheel exposes no tokenizer call. ``n_parallel`` slots
decode several requests together (continuous batching); a slot keeps its prompt in the KV cache,
so successive prompts that share a prefix (the few-shot part) are evaluated once.

Each answer reports its token usage (``take_usage``): prompt and completion tokens, and
``evaluated_tokens``, the tokens llama.cpp actually ran through the model (prompt tokens not
served from its KV cache, plus the generated ones): the figure that sets a local run's time.
A request with a stop rule is streamed and cancelled as soon as its score is settled.

The engine cannot echo a prompt's log-probabilities, so ``logprobs`` scores a text by forcing
it: a grammar of the text's own token ids makes the engine generate exactly those tokens, and
each one's log-probability is read from the model's distribution before sampling. It has no
``logprobs_pass``: a likelihood test's pass over a file (``tabmem.llm.passes``) reaches it as
one text after another in file order, and the slot's prompt cache serves the prefix they share
(only each new row is evaluated as prompt; every scored token is still one decode step). It gives no
moments of that distribution (Min-K%++ needs them): the engine hands out log-probabilities as
JSON, one entry per token asked for, so the whole vocabulary at every position would cost
about 1.6 s and 5 MB per scored token on SmolLM2 (49,152 tokens), some 200 times a plain score.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabmem.errors import ProviderError
from tabmem.llm.base import BaseBackend, GenerationParams, Message, after_bos
from tabmem.llm.openai_http import reply_text
from tabmem.llm.stopping import StopRule
from tabmem.llm.weights import sha256_file

if TYPE_CHECKING:
    from tabmem.llm.backends import BuildContext

INSTALL_HINT = 'install it with: pip install "xllamacpp>=2026.10.11549" (make demo does this)'


class LlamaCppBackend(BaseBackend):
    """A GGUF model loaded once per process, with ``n_parallel`` slots that decode together.

    ``n_threads`` serves both generation and prompt evaluation (None: llama.cpp's defaults,
    which take every core and so slow down a second model beside this one). Each slot has
    ``context_window`` tokens of context.
    """

    moments_unavailable = (
        "the llama.cpp engine returns log-probabilities as JSON entries, and the whole "
        "vocabulary at every token would cost some 200 times a plain score"
    )

    def __init__(
        self,
        weights: Path,
        name: str,
        context_window: int = 4096,
        n_threads: int | None = None,
        n_parallel: int = 1,
        n_batch: int = 512,
    ) -> None:
        try:
            import xllamacpp
        except ImportError as exc:
            raise ProviderError(f"Model '{name}' needs xllamacpp; {INSTALL_HINT}.") from exc
        self.name = name
        self.weights = Path(weights)
        if not self.weights.is_file():
            raise ProviderError(f"Model '{name}' has no weights file at {self.weights}.")
        self.n_parallel = max(1, int(n_parallel))
        self.batch_size = self.n_parallel
        params = xllamacpp.CommonParams()
        params.model.path = str(self.weights)
        params.n_ctx = context_window * self.n_parallel
        params.n_parallel = self.n_parallel
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        if n_threads:
            params.cpuparams.n_threads = n_threads
            params.cpuparams_batch.n_threads = n_threads
        params.warmup = False
        params.verbosity = -1
        self._server = xllamacpp.Server(params)
        self.n_threads = params.cpuparams.n_threads
        self.n_threads_batch = params.cpuparams_batch.n_threads
        self._address = self._server.listening_address
        self._usage = threading.local()
        self._pool = ThreadPoolExecutor(self.n_parallel, thread_name_prefix=f"{name}-slot")
        self.identity = {
            "provider": "llama_cpp",
            "engine": f"xllamacpp {xllamacpp.__version__}",
            "model": name,
            "weights_sha256": sha256_file(self.weights),
            "plain_prompts": "after BOS",  # answers cached before BOS came first are asked again
        }
        if self.n_parallel > 1:  # decoding in a batch changes a few greedy answers (benchmark 3)
            self.identity["n_parallel"] = str(self.n_parallel)

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        return self._generate("chat", params, messages=messages)

    def complete(self, prompt: str, params: GenerationParams) -> str:
        """A plain completion, sent as tokens after the model's BOS, as ``logprobs`` scores and
        the transformers backend asks: llama.cpp puts BOS before a text prompt only where the
        GGUF asks for it (SmolLM2's does not), and a model asked without it answers worse."""
        return self._generate(
            "complete", params, prompt=after_bos(self._token_ids(prompt), self._bos)
        )

    def _generate(self, kind: str, params: GenerationParams, **body: Any) -> str:
        """One generation, keeping its usage. With a stop rule the answer is streamed and the
        request cancelled as soon as the text so far settles the score."""
        server = self._server
        handle = server.handle_chat_completions if kind == "chat" else server.handle_completions
        body.update(
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            cache_prompt=True,
        )
        if params.stop:
            body["stop"] = list(params.stop)
        if params.stop_rule is None:
            out = handle(body)
            _raise_on_error(out, self.name)
            text, timings = reply_text(kind, out), out.get("timings") or {}
        else:
            text, timings = self._streamed_until_settled(handle, body, params.stop_rule)
        self._usage.value = _usage(timings)
        return text

    def _streamed_until_settled(
        self, handle: Any, body: dict[str, Any], rule: StopRule
    ) -> tuple[str, dict[str, Any]]:
        """The streamed text, read until ``rule`` says its score is settled (the engine then
        cancels the request), with the engine's timings as of the last chunk."""
        state: dict[str, Any] = {"text": "", "timings": {}, "error": None}

        def on_chunk(chunk: dict[str, Any]) -> bool:
            if "choices" not in chunk:
                state["error"] = chunk
                return True
            state["timings"] = chunk.get("timings") or state["timings"]
            for choice in chunk["choices"]:
                delta = choice.get("delta")
                state["text"] += (delta.get("content") if delta else choice.get("text")) or ""
            return rule.end(state["text"]) is not None

        handle({**body, "stream": True, "timings_per_token": True}, on_chunk)
        if state["error"] is not None:
            _raise_on_error(state["error"], self.name)
        return state["text"], state["timings"]

    def take_usage(self) -> dict[str, int]:
        """The token usage of this thread's last answer (then forgotten)."""
        usage = getattr(self._usage, "value", None) or {}
        self._usage.value = None
        return usage

    def logprobs(self, text: str, context: str = "") -> list[float] | None:
        return self.logprobs_batch([(context, text)])[0]

    def logprobs_batch(self, items: list[tuple[str, str]]) -> list[list[float]]:
        """Log-probability of every token of each text, read after its context; the texts are
        scored in the engine's slots at once.

        Context and text are tokenized apart (the text's tokens are its own whatever precedes
        it); the context starts with the model's BOS token when it has one, as in the
        transformers backend. Without BOS and without context the first token has no
        prediction and is not scored.
        """
        return list(self._pool.map(lambda item: self._score(*item), items))

    def _score(self, context: str, text: str) -> list[float]:
        prompt = after_bos(self._token_ids(context), self._bos)
        forced = self._token_ids(text)
        if not prompt:
            prompt, forced = forced[:1], forced[1:]
        if not forced:
            return []
        out = self._server.handle_completions(
            {
                "prompt": prompt,
                "max_tokens": len(forced),
                "grammar": "root ::= " + " ".join(f"<[{i}]>" for i in forced),
                "logprobs": 1,
                "post_sampling_probs": False,
                "temperature": 0.0,
                "cache_prompt": True,
            }
        )
        _raise_on_error(out, self.name)
        scored = (out["choices"][0].get("logprobs") or {}).get("content") or []
        ids = [entry["id"] for entry in scored]
        if ids != forced:
            raise ProviderError(
                f"Model '{self.name}' was forced to {len(forced)} tokens but generated "
                f"{len(ids)} other ones; its log-probabilities would not be the text's."
            )
        return [float(entry["logprob"]) for entry in scored]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], ctx: BuildContext) -> LlamaCppBackend:
        """The backend a ``backend: llama_cpp`` model config describes; ``n_threads`` null
        takes the runner's share of the cores; ``n_parallel`` is the slots (and the cell's
        concurrent queries, ``max_concurrency``)."""
        return cls(
            weights=ctx.weights(cfg),
            name=cfg["name"],
            context_window=int(cfg.get("context_window", 4096)),
            n_threads=ctx.cpu_threads(cfg),
            n_parallel=int(cfg.get("n_parallel") or 1),
        )

    def count_tokens(self, text: str) -> int | None:
        return len(self._token_ids(text))

    def tokenize(self, text: str) -> list[str] | None:
        found = self._post("/tokenize", {"content": text, "with_pieces": True})
        return [_piece(token["piece"]) for token in found["tokens"]]

    def _token_ids(self, text: str) -> list[int]:
        """``text``'s tokens, without BOS and with special-token names read as plain text."""
        if not text:
            return []
        body = {"content": text, "add_special": False, "parse_special": False}
        return [int(t) for t in self._post("/tokenize", body)["tokens"]]

    @cached_property
    def _bos(self) -> int | None:
        """The model's BOS token id (its vocabulary names one even where the tokenizer does not
        add it, as SmolLM2's does), or None."""
        name = self._get("/props").get("bos_token")
        if not name:
            return None
        body = {"content": name, "add_special": False, "parse_special": True}
        ids = self._post("/tokenize", body)["tokens"]
        return int(ids[0]) if len(ids) == 1 else None

    def _get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(self._address + path, timeout=60) as response:
            return json.load(response)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self._address + path,
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._server = None


def _raise_on_error(out: dict[str, Any], name: str) -> None:
    """The engine answers a refused request with an error object instead of choices."""
    if "choices" in out:
        return
    error = out.get("error", out)
    message = error.get("message", error) if isinstance(error, dict) else error
    raise ProviderError(f"Model '{name}' refused the request: {message}")


def _usage(timings: Mapping[str, Any]) -> dict[str, int]:
    """Prompt, completion and evaluated tokens from the engine's timings (``cache_n`` prompt
    tokens were served from the slot's KV cache, ``prompt_n`` evaluated)."""
    cached, evaluated = int(timings.get("cache_n", 0)), int(timings.get("prompt_n", 0))
    generated = int(timings.get("predicted_n", 0))
    return {
        "prompt_tokens": cached + evaluated,
        "completion_tokens": generated,
        "evaluated_tokens": evaluated + generated,
    }


def _piece(piece: str | list[int]) -> str:
    """A token's text; the engine gives the bytes of a piece that is not valid UTF-8 alone."""
    return piece if isinstance(piece, str) else bytes(piece).decode("utf-8", errors="replace")
