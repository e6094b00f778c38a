"""Any Hugging Face causal LM, in-process on CPU or GPU: generation and log-probabilities.

Weights come from a local folder (``save_pretrained`` layout) or a local GGUF file
(``gguf_file=``, dequantized by transformers; the tokenizer is read from the same file), so
nothing is downloaded. A GGUF file's dequantized model and tokenizer are kept once converted
(``converted``: the outputs folder's ``weights/transformers``), as the same tensors in
``save_pretrained``'s layout: reading the GGUF file and dequantizing it is most of a load,
reading the kept tensors a small part. Concurrent requests from the client's workers are
gathered into batches (left padding) by a small batcher, so ``max_concurrency`` in the model
config is what makes generation batched.
"""

from __future__ import annotations

import gc
import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from queue import Empty, Queue
from typing import TYPE_CHECKING, Any

from tabmem.errors import ProviderError
from tabmem.llm.base import GenerationParams, Message, after_bos
from tabmem.llm.stopping import StopRule

if TYPE_CHECKING:
    from tabmem.llm.backends import BuildContext

INSTALL_HINT = 'pip install "tabmem[hf]" (torch, transformers, accelerate, gguf)'
FULL_HASH_LIMIT = 4 << 30


def weights_fingerprint(path: Path) -> str:
    """sha256 over a weights file, or over every file of a weights folder (name and bytes).

    Files larger than 4 GiB are fingerprinted by name, size and their first and last MiB,
    which tells checkpoints apart without reading a 70B model.
    """
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path if path.is_dir() else path.parent)).encode())
        size = file.stat().st_size
        digest.update(str(size).encode())
        with file.open("rb") as handle:
            if size <= FULL_HASH_LIMIT:
                for block in iter(lambda h=handle: h.read(1 << 20), b""):
                    digest.update(block)
            else:
                digest.update(handle.read(1 << 20))
                handle.seek(size - (1 << 20))
                digest.update(handle.read())
    return digest.hexdigest()


def keep_conversion(tokenizer: Any, model: Any, folder: Path) -> None:
    """A model dequantized from a GGUF file, and its tokenizer, saved in ``folder`` as the
    same tensors (written beside it, then moved in whole: two processes converting at once
    leave one folder). transformers marks the model as GGUF-quantized and refuses to save it;
    its tensors are plain ones, so the mark is taken off first."""
    import shutil
    import tempfile

    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        partial.rename(folder)
    except OSError:  # another process kept it first
        pass
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def render_plain_chat(messages: Sequence[Message]) -> str:
    """Messages as a plain transcript, for tokenizers without a chat template (base models)."""
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(lines) + "\n\nAssistant:"


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first stop sequence (a model may run past one within a token)."""
    cuts = [at for at in (text.find(s) for s in stop if s) if at >= 0]
    return text[: min(cuts)] if cuts else text


class Batcher:
    """Gathers concurrent calls into batches: ``submit`` blocks until its batch has run.

    Calls whose ``group`` keys are equal (same generation parameters) may share a batch; a
    batch waits up to ``wait_s`` for company and holds at most ``size`` items.
    """

    def __init__(self, run: Callable[[Any, list[Any]], list[Any]], size: int, wait_s: float):
        self._run = run
        self._size = max(1, size)
        self._wait_s = wait_s
        self._queue: Queue[tuple[Any, Any, Future]] = Queue()
        self._held: list[tuple[Any, Any, Future]] = []
        self._worker = threading.Thread(target=self._loop, daemon=True)
        self._worker.start()

    def submit(self, group: Any, item: Any) -> Any:
        future: Future = Future()
        self._queue.put((group, item, future))
        return future.result()

    def _next(self, timeout: float | None) -> tuple[Any, Any, Future] | None:
        if self._held:
            return self._held.pop(0)
        try:
            return self._queue.get(timeout=timeout)
        except Empty:
            return None

    def _loop(self) -> None:
        while True:
            first = self._next(None)
            if first is None:
                continue
            batch, others = [first], []
            while len(batch) < self._size:
                entry = self._next(self._wait_s)
                if entry is None:
                    break
                (batch if entry[0] == first[0] else others).append(entry)
            self._held = others + self._held
            self._execute(first[0], batch)

    def _execute(self, group: Any, batch: list[tuple[Any, Any, Future]]) -> None:
        try:
            results = self._run(group, [item for _, item, _ in batch])
        except Exception as exc:
            for _, _, future in batch:
                future.set_exception(exc)
            return
        for (_, _, future), result in zip(batch, results, strict=True):
            future.set_result(result)


def settled_rows(transformers: Any, rule: StopRule, tokenizer: Any, width: int) -> Any:
    """A stopping criterion that ends each row of a batch once ``rule`` has settled its answer
    (the tokens after the prompt's ``width``), so a finished row stops costing steps and the
    batch ends when every row has settled."""

    class Settled(transformers.StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            texts = tokenizer.batch_decode(input_ids[:, width:], skip_special_tokens=True)
            done = [rule.end(text) is not None for text in texts]
            return input_ids.new_tensor(done, dtype=bool)

    return Settled()


class TransformersBackend:
    """A Hugging Face causal LM: batched generation, chat templates, log-probabilities; it
    stops each answer once the request's stop rule has settled it."""

    supports_logprobs = True

    def __init__(
        self,
        weights: Path,
        name: str,
        context_window: int = 4096,
        device: str = "auto",
        dtype: str = "float32",
        batch_size: int = 8,
        batch_wait_s: float = 0.05,
        threads: int | None = None,
        converted: Path | None = None,
    ) -> None:
        """``threads``: the CPU threads torch uses when the model runs on the CPU (None:
        torch's default, every core), so cells run side by side do not fight over cores;
        ``converted``: where a GGUF file's conversion is kept (None: converted each time)."""
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise ProviderError(
                f"Model '{name}' needs torch and transformers; {INSTALL_HINT}."
            ) from exc
        self.name = name
        self.weights = Path(weights)
        self.context_window = context_window
        self.batch_size = max(1, batch_size)
        self._torch = torch
        self._transformers = transformers
        self._device = (
            ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        )
        if threads and self._device == "cpu":
            torch.set_num_threads(threads)
        self._lock = threading.Lock()
        self._head_matches: bool | None = None
        fingerprint = weights_fingerprint(self.weights) if self.weights.exists() else ""
        kept = None
        if converted is not None and self.weights.is_file():
            kept = converted / f"{self.weights.stem}-{dtype}-{fingerprint[:16]}"
        self.tokenizer, self.model = self._load(transformers, name, dtype, kept)
        self.identity = {
            "provider": "transformers",
            "model": name,
            "weights_sha256": fingerprint,
            "plain_prompts": "after BOS",  # answers cached before BOS came first are asked again
        }
        self._batcher = Batcher(self._generate_batch, self.batch_size, batch_wait_s)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], ctx: BuildContext) -> TransformersBackend:
        """The backend a ``backend: transformers`` model config describes."""
        return cls(
            weights=ctx.weights(cfg),
            name=str(cfg["name"]),
            context_window=int(cfg.get("context_window", 4096)),
            device=str(cfg.get("device", "auto")),
            dtype=str(cfg.get("dtype", "float32")),
            batch_size=int(cfg.get("batch_size", 8)),
            threads=ctx.cpu_threads(cfg),
            converted=ctx.weights_dir / "transformers",
        )

    def _load(self, transformers: Any, name: str, dtype: str, kept: Path | None) -> tuple[Any, Any]:
        """The tokenizer and the model, on their device; a GGUF file's from ``kept`` where its
        conversion is there, else converted (and kept there, with ``kept``)."""
        if not self.weights.exists():
            raise ProviderError(
                f"Model '{name}': no weights at {self.weights}; check weights.path."
            )
        source, extra = str(self.weights), {}
        if kept is not None and (kept / "config.json").is_file():
            source = str(kept)
        elif self.weights.is_file():
            source, extra = str(self.weights.parent), {"gguf_file": self.weights.name}
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(source, **extra)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                source, dtype=getattr(self._torch, dtype), **extra
            )
        except (OSError, ValueError) as exc:
            raise ProviderError(
                f"Model '{name}': transformers cannot load {self.weights} "
                f"({str(exc).splitlines()[0]})."
            ) from exc
        if extra and kept is not None:
            keep_conversion(tokenizer, model, kept)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.to(self._device).eval()
        return tokenizer, model

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            prompt = self.tokenizer.apply_chat_template(
                list(messages), add_generation_prompt=True, tokenize=False
            )
            return self._submit(prompt, False, params)
        return self._submit(render_plain_chat(messages), True, params)

    def complete(self, prompt: str, params: GenerationParams) -> str:
        return self._submit(prompt, True, params)

    def _submit(self, prompt: str, special: bool, params: GenerationParams) -> str:
        """Queue one prompt; prompts that differ only in ``max_tokens`` share a batch."""
        group = replace(params, max_tokens=0)
        return self._batcher.submit(group, (prompt, special, params.max_tokens))

    def _generate_batch(
        self, params: GenerationParams, items: list[tuple[str, bool, int]]
    ) -> list[str]:
        """One ``generate`` call for prompts that share parameters, up to the longest answer;
        each answer is cut to its own ``max_tokens``. Chat-templated prompts already hold their
        special tokens; a plain prompt starts with BOS as a scored context does, also where the
        tokenizer adds none (SmolLM2: the lab's 24-pass checkpoint wrote back 0 of 30 iris rows
        after the ten rows before each alone, 12 of 30 after BOS and the same rows)."""
        torch = self._torch
        rows = [
            self._context_ids(text) if special else self._encode(text, False)
            for text, special, _ in items
        ]
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=self._device)
        mask = torch.tensor(
            [[0] * (width - len(r)) + [1] * len(r) for r in rows], device=self._device
        )
        sampling = params.temperature > 0
        longest = max(limit for _, _, limit in items)
        kwargs: dict[str, Any] = {"do_sample": sampling, "max_new_tokens": longest}
        if sampling:
            kwargs.update(temperature=params.temperature, top_p=params.top_p)
        if params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=self.tokenizer)
        if params.stop_rule is not None:
            kwargs["stopping_criteria"] = self._transformers.StoppingCriteriaList(
                [settled_rows(self._transformers, params.stop_rule, self.tokenizer, width)]
            )
        with self._lock, torch.no_grad():
            if sampling:
                torch.manual_seed(params.seed)
            out = self.model.generate(
                input_ids=ids, attention_mask=mask, pad_token_id=pad, **kwargs
            )
        answers = [out[i, width : width + limit] for i, (_, _, limit) in enumerate(items)]
        texts = self.tokenizer.batch_decode(answers, skip_special_tokens=True)
        return [cut_at_stop(t, params.stop) for t in texts]

    def _encode(self, text: str, special: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def logprobs(self, text: str, context: str = "") -> list[float] | None:
        return self.logprobs_batch([(context, text)])[0]

    def logprobs_batch(self, items: list[tuple[str, str]]) -> list[list[float]]:
        """Log-probability of every token of each text, read after its context.

        Context and text are tokenized apart (the text's tokens are its own whatever precedes
        it); the context starts with the BOS token when the tokenizer has one, so every token
        of the text has a prediction. Without BOS and without context the first is not scored.
        """
        return [
            logp.gather(1, tokens[:, None])[:, 0].tolist()
            for logp, tokens in self._distributions(items)
        ]

    def logprob_moments_batch(
        self, items: list[tuple[str, str]]
    ) -> list[list[tuple[float, float, float]]]:
        """Per token of each text (read as ``logprobs_batch`` reads it): its log-probability,
        and the mean and standard deviation of log p(z) for z drawn from the model's whole
        distribution at its position (what Min-K%++ normalises by; the logits are in hand, so
        they cost one pass over the vocabulary)."""
        return [self._moments(logp, tokens) for logp, tokens in self._distributions(items)]

    def _moments(self, logp: Any, tokens: Any) -> list[tuple[float, float, float]]:
        """Each token's log-probability with the mean and sd of log p over its position's
        distribution (rows of ``logp``: one position each)."""
        torch = self._torch
        probs = logp.exp()
        finite = torch.where(probs > 0, logp, torch.zeros_like(logp))
        mean = (probs * finite).sum(-1)
        var = (probs * (finite - mean[:, None]) ** 2).sum(-1).clamp_min(0.0)
        chosen = logp.gather(1, tokens[:, None])[:, 0]
        return list(zip(chosen.tolist(), mean.tolist(), var.sqrt().tolist(), strict=True))

    @property
    def supports_passes(self) -> bool:
        """Whether a pass can be read with a mask of its own: sdpa or eager attention, and an
        output head this backend applies as the model's own forward does (checked once)."""
        if self.model is None:
            return False
        config = self.model.config
        if getattr(config, "_attn_implementation", "sdpa") not in ("sdpa", "eager"):
            return False
        if self._head_matches is None:
            self._head_matches = self._check_head()
        return self._head_matches

    def logprobs_pass(self, requests: list[Any], moments: bool = False) -> list[list[Any]]:
        """Each ``tabmem.llm.passes.PassRequest`` read once: its pieces in order, then every
        branch beside them, each branch attending to the pieces before its place and to itself
        only, at the positions it would have there. Per request, the log-probabilities of each
        scored piece's tokens, then of each branch's (with ``moments``, each token's
        (log-probability, mean, sd) as ``logprob_moments_batch`` gives them).

        Where every layer attends to the whole context, the pieces run first (plain causal
        attention, keeping their keys and values) and the branches follow in groups over those
        keys; where some layers see a sliding window, pieces and branches run as one sequence
        whose mask keeps each layer's window by position (such a layer keeps no keys beyond its
        window to branch from). No key or value passes from one branch to another, so a branch
        reads exactly what it would read after the same prefix alone."""
        return [self._pass(request, moments) for request in requests]

    def _pass(self, request: Any, moments: bool) -> list[Any]:
        torch = self._torch
        pieces = [self._context_ids(request.pieces[0])]
        pieces += [self._encode(p, False) for p in request.pieces[1:]]
        starts = [0]
        for piece in pieces:
            starts.append(starts[-1] + len(piece))
        trunk = [t for piece in pieces for t in piece]
        branches = [(starts[j], self._encode(text, False)) for j, text in request.branches]
        longest = max([len(trunk)] + [start + len(tokens) for start, tokens in branches])
        if longest > self.context_window:
            raise ValueError(
                f"a pass of {longest} positions exceeds the context window ({self.context_window})"
            )
        with self._lock, torch.no_grad():
            if self._sliding_window() is None:
                states, branch_states = self._trunk_then_branches(trunk, branches)
            else:
                states, branch_states = self._packed(trunk, branches)
            out = []
            for j in request.scored:
                first, end = max(starts[j], 1), starts[j + 1]
                rows = states[first - 1 : end - 1]
                out.append(self._scores_at(rows, trunk[first:end], moments))
            for (start, tokens), own in zip(branches, branch_states, strict=True):
                if start:
                    rows = torch.cat([states[start - 1 : start], own[: len(tokens) - 1]])
                    out.append(self._scores_at(rows, tokens, moments))
                else:  # no BOS and no context: the first token has no prediction
                    out.append(self._scores_at(own[: len(tokens) - 1], tokens[1:], moments))
            return out

    def _sliding_window(self) -> int | None:
        """The window of the model's sliding-window layers, or None where every layer attends
        to the whole context."""
        config = self.model.config
        window = getattr(config, "sliding_window", None)
        kinds = set(getattr(config, "layer_types", None) or [])
        if not window or (kinds and "sliding_attention" not in kinds):
            return None
        if not kinds and not getattr(config, "use_sliding_window", True):
            return None
        return int(window)

    def _trunk_then_branches(
        self, trunk: list[int], branches: list[tuple[int, list[int]]], group_tokens: int = 512
    ) -> tuple[Any, list[Any]]:
        """The pieces' final hidden states (plain causal attention, keys kept), then each
        branch's, the branches run in groups of about ``group_tokens`` over those keys and the
        group's own keys dropped after it."""
        torch = self._torch
        cache = self._transformers.DynamicCache()
        body = self.model.base_model
        ids = torch.tensor([trunk], device=self._device)
        states = body(input_ids=ids, use_cache=True, **{self._cache_argument: cache})
        states = states.last_hidden_state[0]
        out: list[Any] = []
        group: list[tuple[int, list[int]]] = []
        for branch in branches:
            group.append(branch)
            if sum(len(t) for _, t in group) >= group_tokens:
                out += self._branch_group(group, cache, len(trunk))
                group = []
        if group:
            out += self._branch_group(group, cache, len(trunk))
        return states, out

    def _branch_group(
        self, group: list[tuple[int, list[int]]], cache: Any, length: int
    ) -> list[Any]:
        torch = self._torch
        ids = [t for _, tokens in group for t in tokens]
        positions = [start + k for start, tokens in group for k in range(len(tokens))]
        allowed = torch.zeros(len(ids), length + len(ids), dtype=torch.bool)
        at = 0
        for start, tokens in group:
            size = len(tokens)
            allowed[at : at + size, :start] = True
            allowed[at : at + size, length + at : length + at + size] = torch.ones(
                size, size, dtype=torch.bool
            ).tril()
            at += size
        states = self.model.base_model(
            input_ids=torch.tensor([ids], device=self._device),
            attention_mask=self._as_attention_mask(allowed),
            position_ids=torch.tensor([positions], device=self._device),
            use_cache=True,
            **{self._cache_argument: cache},
        ).last_hidden_state[0]
        cache.crop(-len(ids))
        out, at = [], 0
        for _, tokens in group:
            out.append(states[at : at + len(tokens)])
            at += len(tokens)
        return out

    @property
    def _cache_argument(self) -> str:
        """What the model's forward calls its key-value cache (``cache`` from transformers 5)."""
        import inspect

        parameters = inspect.signature(self.model.base_model.forward).parameters
        return "cache" if "cache" in parameters else "past_key_values"

    def _packed(
        self, trunk: list[int], branches: list[tuple[int, list[int]]]
    ) -> tuple[Any, list[Any]]:
        """Pieces and branches as one sequence, one mask per kind of layer (the sliding one
        keeps the window by position): the pieces' final hidden states and each branch's."""
        torch = self._torch
        length = len(trunk)
        ids, positions = list(trunk), list(range(length))
        spans = []
        for start, tokens in branches:
            spans.append((start, len(ids), len(tokens)))
            ids += tokens
            positions += [start + k for k in range(len(tokens))]
        n = len(ids)
        allowed = torch.zeros(n, n, dtype=torch.bool)
        allowed[:length, :length] = torch.ones(length, length, dtype=torch.bool).tril()
        for start, offset, size in spans:
            allowed[offset : offset + size, :start] = True
            allowed[offset : offset + size, offset : offset + size] = torch.ones(
                size, size, dtype=torch.bool
            ).tril()
        at = torch.tensor(positions, dtype=torch.int32)
        sliding = allowed & ((at[:, None] - at[None, :]) < self._sliding_window())
        kinds = set(getattr(self.model.config, "layer_types", None) or [])
        mask: Any = self._as_attention_mask(sliding)
        if kinds:
            full = self._as_attention_mask(allowed)
            mask = {"full_attention": full, "sliding_attention": mask}
        states = self.model.base_model(
            input_ids=torch.tensor([ids], device=self._device),
            attention_mask=mask,
            position_ids=torch.tensor([positions], device=self._device),
            use_cache=False,
        ).last_hidden_state[0]
        return states[:length], [states[o : o + size] for _, o, size in spans]

    def _as_attention_mask(self, allowed: Any) -> Any:
        """A (queries, keys) mask of allowed pairs as the attention adds it: 0 where allowed,
        the dtype's lowest value elsewhere (exactly 0 after the softmax; sdpa runs a float
        mask faster than a boolean one on CPUs)."""
        torch = self._torch
        mask = allowed[None, None].to(self._device)  # (batch, heads, queries, keys)
        floor = torch.finfo(self.model.dtype).min
        zeros = torch.zeros(mask.shape, dtype=self.model.dtype, device=self._device)
        return zeros.masked_fill(~mask, floor)

    def _scores_at(self, states: Any, tokens: list[int], moments: bool) -> list[Any]:
        """The log-probabilities of ``tokens``, each predicted at its row of final hidden
        ``states`` (with moments where asked), the vocabulary read a slice of rows at a time."""
        torch = self._torch
        if not tokens:
            return []
        vocabulary = int(self.model.get_output_embeddings().weight.shape[0])
        step = max(16, (1 << 24) // vocabulary)
        out: list[Any] = []
        for at in range(0, len(tokens), step):
            chosen = torch.tensor(tokens[at : at + step], device=self._device)
            logp = torch.log_softmax(self._head(states[at : at + step]).float(), dim=-1)
            if moments:
                out += self._moments(logp, chosen)
            else:
                out += logp.gather(1, chosen[:, None])[:, 0].tolist()
        return out

    def _head(self, hidden: Any) -> Any:
        """The logits the model's own forward makes of final hidden states: its output head,
        and the scalings some models apply after it (Gemma's soft cap, Cohere's and Granite's
        scales)."""
        torch = self._torch
        config = self.model.config
        logits = self.model.get_output_embeddings()(hidden)
        cap = getattr(config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        if getattr(config, "logit_scale", None):
            logits = logits * config.logit_scale
        if getattr(config, "logits_scaling", None):
            logits = logits / config.logits_scaling
        return logits

    def _check_head(self) -> bool:
        """Whether ``_head`` over the base model gives the full model's logits (a few tokens)."""
        torch = self._torch
        ids = torch.tensor([self._context_ids("a,1\n")], device=self._device)
        with self._lock, torch.no_grad():
            full = self.model(input_ids=ids).logits[0].float()
            mine = self._head(self.model.base_model(input_ids=ids).last_hidden_state[0]).float()
        return bool(torch.allclose(full, mine, atol=1e-4, rtol=1e-4))

    def _distributions(self, items: list[tuple[str, str]]) -> list[tuple[Any, Any]]:
        """For each (context, text): the log-softmax over the vocabulary at the position of
        each scored token of the text (one row a token) and those tokens' ids, from one
        forward pass over the batch."""
        torch = self._torch
        encoded = [(self._context_ids(c), self._encode(t, False)) for c, t in items]
        rows = [c + t for c, t in encoded]
        longest = max(len(r) for r in rows)
        if longest > self.context_window:
            raise ValueError(
                f"a text of {longest} tokens exceeds the context window ({self.context_window})"
            )
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([r + [pad] * (longest - len(r)) for r in rows], device=self._device)
        mask = torch.tensor(
            [[1] * len(r) + [0] * (longest - len(r)) for r in rows], device=self._device
        )
        with self._lock, torch.no_grad():
            logits = self.model(input_ids=ids, attention_mask=mask).logits
            out = []
            for i, (context, text) in enumerate(encoded):
                start, end = max(len(context), 1), len(context) + len(text)
                logp = torch.log_softmax(logits[i, start - 1 : end - 1].float(), dim=-1)
                out.append((logp, ids[i, start:end]))
        return out

    def _context_ids(self, context: str) -> list[int]:
        return after_bos(self._encode(context, True), self.tokenizer.bos_token_id)

    def count_tokens(self, text: str) -> int | None:
        return len(self._encode(text, False))

    def tokenize(self, text: str) -> list[str] | None:
        ids = self._encode(text, False)
        return [self.tokenizer.decode([i]) for i in ids]

    def close(self) -> None:
        with self._lock:
            self.model = None
            gc.collect()
            if self._device.startswith("cuda"):
                self._torch.cuda.empty_cache()
