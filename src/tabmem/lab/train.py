"""Fine-tune a small causal LM on canonical CSV files, saving a checkpoint after chosen passes.

The model reads each planted file's exact text from its first character (the tokenizer's
BOS first, as a prompt gets it), cut into blocks of ``block_size`` tokens, in the plan's
seeded order; where the plan has a stream, among documents of other text read the same way.
Full fine-tuning or LoRA (``peft``; merged into the weights at every save, so each checkpoint
is a plain model folder any backend can load).
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from tabmem.errors import ProviderError
from tabmem.lab.plan import LabPlan
from tabmem.lab.stream import other_documents

HINT = 'the lab needs torch, transformers and peft: pip install "tabmem[hf]"'


def load_base(weights: Path, device: str, dtype: str) -> tuple[Any, Any]:
    """Tokenizer and model from a weights folder or a GGUF file (dequantized)."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ProviderError(f"The contamination lab cannot start; {HINT}.") from exc
    source, extra = str(weights), {}
    if weights.is_file():
        source, extra = str(weights.parent), {"gguf_file": weights.name}
    tokenizer = transformers.AutoTokenizer.from_pretrained(source, **extra)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        source, dtype=getattr(torch, dtype), **extra
    )
    if extra:
        model = unquantized_copy(transformers, model)
    return tokenizer, model.to(resolve_device(device))


def unquantized_copy(transformers: Any, model: Any) -> Any:
    """The same weights in a plain model: transformers marks a model read from GGUF as
    quantized (even once dequantized) and refuses to save it, and the lab saves checkpoints."""
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = transformers.AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    plain.load_state_dict(model.state_dict())
    return plain


def resolve_device(device: str) -> str:
    import torch

    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def token_ids(tokenizer: Any, text: str) -> list[int]:
    """A text's tokens, BOS first when the tokenizer adds one."""
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])


def cut_blocks(ids: list[int], block_size: int) -> list[list[int]]:
    """Tokens cut into consecutive blocks; a last block of one token is left out: it has no
    token to predict, and its loss, a mean over nothing, would be NaN and turn every weight
    NaN at the next step."""
    blocks = [ids[i : i + block_size] for i in range(0, len(ids), block_size)]
    return [b for b in blocks if len(b) > 1]


def file_blocks(tokenizer: Any, text: str, block_size: int) -> list[list[int]]:
    """A file's tokens (``token_ids``) cut into blocks (``cut_blocks``)."""
    return cut_blocks(token_ids(tokenizer, text), block_size)


def with_lora(model: Any, r: int, alpha: int) -> Any:
    """The model with LoRA adapters on every linear layer; only they are trained."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        raise ProviderError(f"LoRA needs peft; {HINT}.") from exc
    config = LoraConfig(r=r, lora_alpha=alpha, target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def save_checkpoint(model: Any, tokenizer: Any, folder: Path, lora: bool) -> Path:
    """A plain model folder (LoRA merged into a copy of the weights) with its tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    plain = copy.deepcopy(model).merge_and_unload() if lora else model
    plain.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _batches(blocks: list[list[int]], size: int) -> list[list[list[int]]]:
    return [blocks[i : i + size] for i in range(0, len(blocks), size)]


def _step(
    model: Any,
    optimizer: Any,
    batch: list[list[int]],
    pad: int,
    device: str,
    clip: Callable[[], Any] | None = None,
) -> float:
    """One optimizer step on a batch of blocks (right padding, padded positions not learned);
    ``clip`` runs on the gradients before the step (None: they are used as they are)."""
    import torch

    width = max(len(b) for b in batch)
    ids = torch.tensor([b + [pad] * (width - len(b)) for b in batch], device=device)
    labels = torch.tensor([b + [-100] * (width - len(b)) for b in batch], device=device)
    mask = (labels != -100).long()
    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    if clip is not None:
        clip()
    optimizer.step()
    optimizer.zero_grad()
    return float(loss.item())


def fine_tune(
    plan: LabPlan,
    texts: Mapping[str, str],
    base_weights: Path,
    training: Mapping[str, Any],
    out_dir: Path,
    seed: int,
    log: Callable[[str], None] = print,
) -> dict[int, Path]:
    """Train through the plan's passes on each planted dataset's text (``texts``, from
    ``LabPlan.planted_text``), saving the requested checkpoints (pass -> folder)."""
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    device = resolve_device(str(training.get("device", "auto")))
    tokenizer, model = load_base(base_weights, device, str(training.get("dtype", "float32")))
    lora = str(training.get("method", "full")) == "lora"
    if lora:
        model = with_lora(
            model, int(training.get("lora_r", 16)), int(training.get("lora_alpha", 32))
        )
    model.train()
    block_size = int(training.get("block_size", 512))
    blocks = {d: file_blocks(tokenizer, texts[d], block_size) for d in plan.planted}
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=float(training.get("learning_rate", 1e-4)))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    norm = training.get("max_grad_norm")
    clip = partial(torch.nn.utils.clip_grad_norm_, trainable, float(norm)) if norm else None
    saved: dict[int, Path] = {}
    if 0 in plan.checkpoints:
        saved[0] = save_checkpoint(model, tokenizer, out_dir / "p0", lora)
    started = time.monotonic()
    mixing = random.Random(seed)
    ids: dict[str, list[int]] = {}  # other text, each document tokenized once: counted, then cut

    def count(text: str) -> int:
        if text not in ids:
            ids[text] = token_ids(tokenizer, text)
        return len(ids[text])

    for number, names in enumerate(plan.schedule(seed), start=1):
        documents = [blocks[name] for name in names]
        other = 0
        if plan.stream is not None:
            wanted = int(plan.stream.ratio * sum(len(b) for d in documents for b in d))
            texts_read = other_documents(plan.stream, wanted, count, mixing)
            extra = [cut_blocks(ids[t], block_size) for t in texts_read]
            other = sum(len(d) for d in extra)
            documents += extra
            mixing.shuffle(documents)
        sequences = [b for d in documents for b in d]
        losses = [
            _step(model, optimizer, batch, pad, device, clip)
            for batch in _batches(sequences, int(training.get("batch_size", 1)))
        ]
        mean = sum(losses) / max(len(losses), 1)
        log(
            f"pass {number}/{plan.passes}: {len(sequences)} blocks"
            + (f" ({other} of other text)" if plan.stream is not None else "")
            + f", mean loss {mean:.3f}, "
            f"{time.monotonic() - started:.0f} s"
        )
        if number in plan.checkpoints:
            saved[number] = save_checkpoint(model, tokenizer, out_dir / f"p{number}", lora)
    return saved
