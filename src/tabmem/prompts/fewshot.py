"""Zero-knowledge few-shot examples: always from *other* datasets, never the tested one.

Examples come from datasets of another family only, so nothing about the tested
dataset (not even a close relative, such as Titanic for Spaceship Titanic) leaks
into the prompt.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tabmem.data import Dataset, dataset_specs, load_dataset
from tabmem.errors import DatasetError
from tabmem.llm.base import GenerationParams, Message, Request


def few_shot_datasets(
    tested: Dataset, pool: Sequence[str], k: int, rng: random.Random
) -> list[Dataset]:
    """Up to ``k`` datasets drawn from ``pool``, excluding the tested dataset's family.

    Datasets whose file is not present are left out of the pool silently: the pool
    is a preference list, not a requirement.
    """
    specs = dataset_specs()
    candidates = []
    for name in pool:
        spec = specs.get(name)
        if spec is None or spec.family_name == tested.spec.family_name:
            continue
        try:
            candidates.append(load_dataset(spec))
        except DatasetError:
            continue
    rng.shuffle(candidates)
    return candidates[:k]


def chat_messages(
    system: str, examples: Sequence[tuple[str, str]], question: str
) -> tuple[Message, ...]:
    """System prompt, then each example as a user/assistant pair, then the question."""
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    for user, assistant in examples:
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": assistant})
    messages.append({"role": "user", "content": question})
    return tuple(messages)


@dataclass(frozen=True)
class FittedRequest:
    """A request that fits the model's context window, and how many examples were dropped."""

    request: Request | None
    dropped_examples: int


def fit_to_context(
    build: Callable[[int], Request],
    n_examples: int,
    count_tokens: Callable[[str], int],
    context_window: int,
    params: GenerationParams,
) -> FittedRequest:
    """Drop few-shot examples, last first, until prompt plus answer fit the context window.

    If the question alone does not fit, the request is None: a prompt is never cut
    in the middle of a row.
    """
    for kept in range(n_examples, -1, -1):
        request = build(kept)
        overhead = 8 * len(request.messages or ())
        if count_tokens(request.as_text()) + overhead + params.max_tokens <= context_window:
            return FittedRequest(request, n_examples - kept)
    return FittedRequest(None, n_examples)
