"""Models that reason before they answer: thoughts kept apart from the answer that is scored.

A reasoning model writes its thoughts either into the text (``inline``: ``<think>…</think>``
before the answer, as open models do when their server has no reasoning parser) or beside it
(``separate``: the provider's ``reasoning_content``, which the backends join to the text as a
think block, so the cache keeps it and it is split the same way). For such a model the
request the provider sees differs from the test's in two ways: no stop sequences and no stop
rule (a stop sequence such as a newline would end the generation inside the thoughts; both
are applied here, to the answer, once the thoughts are cut off) and ``allowance`` more tokens,
room for the thoughts.

A model whose config leaves ``reasoning`` out and whose name implies none is still watched
(``detect``): the first reply that opens with a thought block makes it an ``inline`` reasoning
model for the rest of the run (``detected``), whatever it is called.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams
from tabmem.llm.stopping import cut_at_stops

MODES = ("none", "inline", "separate")
DEFAULT_ALLOWANCE = 2048  # tokens of thoughts per query: the dry run's bound includes them

# The tags open models wrap their thoughts in; ``</think>`` alone ends thoughts whose opening
# tag was in the chat template's prompt (DeepSeek-R1 and its distillations).
TAGS = ("think", "thinking", "thought", "reasoning", "reason")
_OPEN = re.compile(r"^\s*<(" + "|".join(TAGS) + r")>", re.IGNORECASE)
_CLOSE = re.compile(r"</(" + "|".join(TAGS) + r")>", re.IGNORECASE)

# Model names whose providers return thoughts apart from the answer (OpenAI's reasoning
# models, DeepSeek's reasoner), or write them inline (open reasoning models served as-is).
SEPARATE_BY_DEFAULT = re.compile(r"(^|/)(o1|o3|o4|gpt-5|deepseek-reasoner)([-.:]|$)")
INLINE_BY_DEFAULT = re.compile(r"(deepseek-r1|qwq|qwen3|r1-distill|phi-4-reasoning)", re.I)


@dataclass(frozen=True)
class Reasoning:
    """How a model reasons (``mode``), the tokens left for thoughts (``allowance``) and the
    provider's ``reasoning_effort`` to pass through (None: the provider's default)."""

    mode: str = "none"
    allowance: int = 0
    effort: str | None = None
    detect: bool = True  # mode "none" by default, not by config: thoughts in a reply switch it

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(
                f"reasoning: '{self.mode}' is not a mode; use one of {', '.join(MODES)}."
            )

    @property
    def active(self) -> bool:
        return self.mode != "none"

    def as_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "allowance": self.allowance, "effort": self.effort}

    def detected(self) -> Reasoning:
        """How a model that was not known to reason, but wrote a thought block, reasons from
        then on: inline, with the default allowance."""
        return Reasoning("inline", DEFAULT_ALLOWANCE, self.effort, detect=False)

    @classmethod
    def of_model(cls, cfg: Mapping[str, Any]) -> Reasoning:
        """The reasoning of a model config, its default read from the provider's model name
        (``litellm_model``) or else the config's name: the one place both the client (which
        cuts thoughts off) and the backend (which sends the effort) take it from."""
        return cls.from_config(dict(cfg), str(cfg.get("litellm_model") or cfg["name"]))

    @classmethod
    def from_config(cls, cfg: dict, model_name: str = "") -> Reasoning:
        """The ``reasoning``, ``reasoning_allowance`` and ``reasoning_effort`` of a model
        config; ``reasoning`` left out takes the default its model name implies."""
        mode = cfg.get("reasoning") or default_mode(model_name)
        allowance = cfg.get("reasoning_allowance")
        allowance = int(allowance) if allowance is not None else DEFAULT_ALLOWANCE
        effort = cfg.get("reasoning_effort")
        detect = mode == "none" and not cfg.get("reasoning")
        return cls(str(mode), allowance if mode != "none" else 0, effort and str(effort), detect)


def default_mode(model_name: str) -> str:
    """The reasoning mode a provider's model name implies; ``none`` for the rest."""
    if SEPARATE_BY_DEFAULT.search(model_name):
        return "separate"
    if INLINE_BY_DEFAULT.search(model_name):
        return "inline"
    return "none"


def split_thoughts(text: str) -> tuple[str, str]:
    """``(answer, thoughts)`` of a generated text. Thoughts are a leading tagged block, or
    everything before a closing tag that has no opening one; a block that never closes (the
    model ran out of tokens while thinking) is all thoughts and no answer."""
    opened = _OPEN.match(text)
    closed = _CLOSE.search(text, opened.end() if opened else 0)
    if opened is None and closed is None:
        return text, ""
    if closed is None:
        return "", text[opened.end() :].strip()  # type: ignore[union-attr]
    thoughts = text[opened.end() if opened else 0 : closed.start()]
    return text[closed.end() :].lstrip(), thoughts.strip()


def opens_with_thoughts(text: str) -> bool:
    """Whether a reply begins with an opening thought tag (``<think>``…)."""
    return _OPEN.match(text) is not None


def joined(answer: str, thoughts: str) -> str:
    """A separate ``reasoning_content`` and its answer as one text with a think block."""
    return f"<think>{thoughts}</think>{answer}" if thoughts else answer


def provider_params(params: GenerationParams, reasoning: Reasoning) -> GenerationParams:
    """What the provider is asked for: no stop sequences or stop rule, room for thoughts."""
    if not reasoning.active:
        return params
    return replace(
        params, max_tokens=params.max_tokens + reasoning.allowance, stop=(), stop_rule=None
    )


def finish(text: str, params: GenerationParams) -> tuple[str, str]:
    """The scored answer (thoughts cut off, then the test's stop sequences and stop rule
    applied to it) and the thoughts."""
    answer, thoughts = split_thoughts(text)
    answer = cut_at_stops(answer, params.stop)
    if params.stop_rule is not None:
        answer = params.stop_rule.cut(answer)
    return answer, thoughts
