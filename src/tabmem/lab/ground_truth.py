"""How much a lab checkpoint learned of a file, measured directly: the lab's ground truth.

Two measures beside the tests' verdicts, so that a miss on a file the model barely learned
can be told from a miss on a file it knows:

- **loss**: the mean per-token negative log-likelihood (nats) of the file's text, cut into
  the same ``block_size``-token blocks as in training (BOS first, each block read alone);
  compared with the base model's, the drop is what fine-tuning taught.
- **rows written back**: of a seeded sample of data rows, the share the model writes back
  exactly, greedily, from the raw file's header and the ten rows before it.

Fine-tuning on a few files moves the loss of every table's text (in the lab's full setting a
held-out file's loss rose by 3 nats a token), so a loss drop mixes what was learned of a file
with that drift and with its format. Two controls take them out, each a text set against the
file's own on the same checkpoint, against the base model (nats a token; 0 when nothing of the
file's rows was learned beyond the control):

- ``learned_over_twin``: how much more the file's loss fell than its twin's
  (``tabmem.data.twin``: the same header, formats and distributions, rows no model saw): what
  was learned about *these rows*, not the table's format or domain;
- ``learned_over_unread``: where only a file's first rows were read, how much more their loss
  fell than the loss of the same file's unread rows; for a part of a larger file
  (``tabmem.lab.slices``), how much more it fell than the never-read parts' (``siblings``).

The twin is a model of the file's distribution, and a model that learned that distribution
better than the twin (from the other parts of the same file, say) lowers a real row's loss
more than a twin row's whether or not it read that row: in the lab's parts setting the
never-read parts learned as much over their twins as the parts read 4 times. Where a file has
unread rows of its own, they are the control that tells reading from knowing the distribution.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tabmem.data.csvtext import detect_newline, split_records
from tabmem.lab.models import checkpoint_name
from tabmem.lab.plan import LabPlan
from tabmem.lab.train import file_blocks, load_base

CONTEXT_ROWS = 10
CONTROLS = ("twin", "unread")
"""The texts a file's loss is set against (see above); a file may lack one (read whole: no
unread rows)."""


@dataclass(frozen=True)
class GroundTruth:
    """One checkpoint on one file: mean token loss over ``tokens`` predicted tokens (of
    ``blocks`` blocks), ``written_back`` of ``rows`` sampled rows reproduced exactly, and the
    mean token loss of each control text it has (``CONTROLS``)."""

    loss: float
    tokens: int
    blocks: int
    written_back: int
    rows: int
    control_losses: Mapping[str, float] = field(default_factory=dict)

    @property
    def share(self) -> float:
        """The share of sampled rows written back (NaN when no row was sampled)."""
        return self.written_back / self.rows if self.rows else float("nan")


def mean_token_loss(
    model: Any, tokenizer: Any, text: str, block_size: int, max_blocks: int, batch: int = 8
) -> tuple[float, int, int]:
    """Mean negative log-likelihood per predicted token of ``text`` in training's blocks (the
    first ``max_blocks``), with the number of tokens and blocks it covers."""
    import torch

    blocks = file_blocks(tokenizer, text, block_size)[:max_blocks]
    device = next(model.parameters()).device
    total, count = 0.0, 0
    model.eval()
    for start in range(0, len(blocks), batch):
        part = blocks[start : start + batch]
        width = max(len(b) for b in part)
        ids = torch.tensor([b + [0] * (width - len(b)) for b in part], device=device)
        mask = torch.tensor([[1] * len(b) + [0] * (width - len(b)) for b in part], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        nll = -logp.gather(2, ids[:, 1:, None])[..., 0]
        total += float((nll * mask[:, 1:]).sum())
        count += int(mask[:, 1:].sum())
    return (total / count if count else float("nan")), count, len(blocks)


def row_prompts(text: str, rows: int, seed: int) -> list[tuple[str, str]]:
    """A seeded sample of at most ``rows`` data rows, each with its prompt: the header and the
    (up to) ten rows before it, exactly as in the file, newline-terminated."""
    records = split_records(text)
    newline = detect_newline(text)
    chosen = sorted(random.Random(seed).sample(range(1, len(records)), min(rows, len(records) - 1)))
    return [
        (newline.join([records[0], *records[max(1, i - CONTEXT_ROWS) : i]]) + newline, records[i])
        for i in chosen
    ]


def first_line(generated: str, newline: str) -> str:
    """What the model wrote up to the file's line break (all of it when it wrote none)."""
    return generated.split(newline, 1)[0]


def rows_written_back(
    model: Any, tokenizer: Any, text: str, rows: int, seed: int, batch: int = 8
) -> tuple[int, int]:
    """How many of the sampled rows the model writes back exactly (greedy, from the raw file
    context), of how many sampled."""
    import torch

    newline = detect_newline(text)
    prompts = row_prompts(text, rows, seed)
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    hits = 0
    model.eval()
    for start in range(0, len(prompts), batch):
        part = prompts[start : start + batch]
        encoded = [list(tokenizer(p, add_special_tokens=True)["input_ids"]) for p, _ in part]
        width = max(len(e) for e in encoded)
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded], device=device)
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], device=device)
        longest = max(
            len(tokenizer(r + newline, add_special_tokens=False)["input_ids"]) for _, r in part
        )
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=longest + 4,
                pad_token_id=pad,
            )
        texts = tokenizer.batch_decode(
            out[:, width:], skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        hits += sum(first_line(t, newline) == row for t, (_, row) in zip(texts, part, strict=True))
    return hits, len(prompts)


def measure(
    model: Any,
    tokenizer: Any,
    text: str,
    block_size: int,
    rows: int = 20,
    seed: int = 0,
    max_blocks: int = 48,
    controls: Mapping[str, str] | None = None,
) -> GroundTruth:
    """Both measures of one loaded model on one file's text, and the loss of each of its
    ``controls`` (control -> text)."""
    loss, tokens, blocks = mean_token_loss(model, tokenizer, text, block_size, max_blocks)
    written, sampled = rows_written_back(model, tokenizer, text, rows, seed)
    losses = {
        name: mean_token_loss(model, tokenizer, other, block_size, max_blocks)[0]
        for name, other in (controls or {}).items()
    }
    return GroundTruth(loss, tokens, blocks, written, sampled, losses)


def measure_checkpoint(
    weights: Path,
    texts: Mapping[str, str],
    block_size: int,
    device: str = "auto",
    rows: int = 20,
    seed: int = 0,
    max_blocks: int = 48,
    controls: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, GroundTruth]:
    """Load one checkpoint (a model folder or the base model's weights, as training loads
    them) and measure it on every file (dataset -> text) and its controls (control -> dataset
    -> text)."""
    tokenizer, model = load_base(weights, device, "float32")
    controls = controls or {}
    return {
        name: measure(
            model,
            tokenizer,
            text,
            block_size,
            rows,
            seed,
            max_blocks,
            {c: texts[name] for c, texts in controls.items() if name in texts},
        )
        for name, text in texts.items()
    }


GROUND_TRUTH_COLUMNS = [
    "checkpoint",
    "passes",
    "repetitions",
    "dataset",
    "group",
    "first_rows",
    "loss",
    "base_loss",
    "loss_drop",
    *(f"{c}_{what}" for c in CONTROLS for what in ("loss", "loss_drop")),
    *(f"learned_over_{c}" for c in CONTROLS),
    "rows_written_back",
    "rows_n",
    "tokens",
]


def ground_truth_table(
    plan: LabPlan,
    checkpoints: Mapping[int, Path],
    base: Path,
    texts: Mapping[str, str],
    block_size: int,
    device: str = "auto",
    rows: int = 20,
    seed: int = 0,
    max_blocks: int = 48,
    log: Callable[[str], None] = print,
    controls: Mapping[str, Mapping[str, str]] | None = None,
) -> pd.DataFrame:
    """Every checkpoint × file (``texts``: planted files as planted, held-out files whole;
    ``controls``: control -> dataset -> text, see ``CONTROLS``) against the base model
    (``base``; checkpoint 0 is the base model and is not loaded twice): one row each with the
    columns of ``GROUND_TRUTH_COLUMNS``."""
    measured: dict[int, dict[str, GroundTruth]] = {}
    for passes, folder in sorted(checkpoints.items(), reverse=True):
        started = time.monotonic()
        measured[passes] = measure_checkpoint(
            folder, texts, block_size, device, rows, seed, max_blocks, controls
        )
        log(f"ground truth after {passes} passes: {time.monotonic() - started:.0f} s")
    reference = measured.get(0) or measure_checkpoint(
        base, texts, block_size, device, rows, seed, max_blocks, controls
    )
    out = []
    for passes, found in sorted(measured.items()):
        for dataset, truth in found.items():
            base_truth = reference[dataset]
            out.append(
                {
                    "checkpoint": checkpoint_name(plan.name, passes),
                    "passes": passes,
                    "repetitions": plan.seen(dataset, passes),
                    "dataset": dataset,
                    "group": "planted" if dataset in plan.planted else "held out",
                    "first_rows": plan.first_rows.get(dataset, 0),
                    "loss": truth.loss,
                    "base_loss": base_truth.loss,
                    "loss_drop": base_truth.loss - truth.loss,
                    **_controlled(truth, base_truth),
                    "rows_written_back": truth.share,
                    "rows_n": truth.rows,
                    "tokens": truth.tokens,
                }
            )
    return pd.DataFrame(out, columns=GROUND_TRUTH_COLUMNS)


def siblings(truth: pd.DataFrame, never_read: Sequence[str]) -> pd.DataFrame:
    """The unread control of parts of one file (``tabmem.lab.slices``; ``truth``: their rows
    of the ground truth, ``never_read``: the parts no checkpoint read): on each checkpoint, the
    mean loss and loss drop of the never-read parts other than the part itself, and how much
    more the part's loss fell (``learned_over_unread``)."""
    out = truth.copy()
    for index, row in truth.iterrows():
        mine = truth[
            (truth["passes"] == row["passes"])
            & truth["dataset"].isin(never_read)
            & (truth["dataset"] != row["dataset"])
        ]
        if mine.empty:
            continue
        out.loc[index, "unread_loss"] = mine["loss"].mean()
        out.loc[index, "unread_loss_drop"] = mine["loss_drop"].mean()
        out.loc[index, "learned_over_unread"] = row["loss_drop"] - mine["loss_drop"].mean()
    return out


def _controlled(truth: GroundTruth, base: GroundTruth) -> dict[str, float]:
    """Each control's loss and loss drop, and how much more the file's loss fell (NaN where
    the file has no such control)."""
    nan = float("nan")
    out = {}
    for name in CONTROLS:
        loss = truth.control_losses.get(name, nan)
        drop = base.control_losses.get(name, nan) - loss
        out[f"{name}_loss"] = loss
        out[f"{name}_loss_drop"] = drop
        out[f"learned_over_{name}"] = (base.loss - truth.loss) - drop
    return out
