"""Rows as ``IF Feature = Value, … THEN Target =`` questions, in chat and completion form.

The wording of the question comes from the test's config; this module only fills it in.
Chat models get each example as a user turn (the question) and an assistant turn (the
label); base models get the same lines as one text, each example finished by its label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tabmem.llm.base import GenerationParams, Request
from tabmem.prompts.fewshot import chat_messages


@dataclass(frozen=True)
class IfThenFormat:
    """How a row becomes a question: the template, one pair, and what joins the pairs."""

    question: str
    pair: str
    joiner: str

    def ask(self, names: Sequence[str], values: Sequence[str], target: str) -> str:
        """The question for one row; features with an empty value are left out."""
        pairs = self.joiner.join(
            self.pair.format(name=n, value=v) for n, v in zip(names, values, strict=True) if v
        )
        return self.question.format(features=pairs, target=target)


def ifthen_request(
    chat: bool,
    system: str,
    shots: Sequence[tuple[str, str]],
    question: str,
    params: GenerationParams,
) -> Request:
    """The request for one question after its examples (``(question, label)`` pairs)."""
    if chat:
        return Request(params=params, messages=chat_messages(system, shots, question))
    head = f"{system}\n\n" if system else ""
    lines = "".join(f"{q} {a}\n" for q, a in shots)
    return Request(params=params, prompt=head + lines + question)
