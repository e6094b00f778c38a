"""Multiple-choice questions: lettered options in one template, and reading the answer back.

Options are shown one per line as ``A) text``. An answer is read by the first rule that applies:

1. ``letter``: the answer is one option letter, maybe bracketed or in bold (``B``, ``(B)``,
   ``**B.**``), or begins with one followed by ``)``, ``.``, ``:`` or ``]`` (``B) 3.5``);
2. ``named_letter``: a letter named as the answer (``The answer is B``, ``Answer: (C)``,
   ``option D``, ``row E``);
3. ``option_text``: the full text of exactly one option occurs in the answer (case and spacing
   ignored);
4. ``value``: for single-value options, the answer's first line, without a leading
   ``Name =``, is exactly one option's value (numbers compared as numbers), or exactly one
   option's value occurs in the answer as a whole word.

A letter that is not one of the options, or text naming no option or several, is
``unparseable``: counted apart, scored as a miss.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tabmem.llm.base import GenerationParams, Request
from tabmem.prompts.fewshot import chat_messages
from tabmem.stats.answers import values_match

LETTERS = "ABCDEFGHIJ"
UNPARSEABLE = "unparseable"

_LONE = re.compile(r"[\W_]*\(?([A-J])\)?[\W_]*")
_LEADING = re.compile(r"\s*[(\[]?([A-J])(?:[).:\]]|\s+[-–—]|[ \t]*(?:\n|$))")
_NAMED = re.compile(
    r"(?i:\b(?:answer|option|choice|row|record)\b)(?:\s+(?i:is|would\s+be))?\s*[:=\-]?\s*"
    r"[(\[]?(?!A\s+[a-z])([A-J])\b(?![\w'])"
)


@dataclass(frozen=True)
class Option:
    """One option: the text shown after its letter, and (single-value options) the bare value."""

    text: str
    value: str = ""


@dataclass(frozen=True)
class Choice:
    """The option an answer picked (``index`` None when unparseable) and the rule that read it."""

    index: int | None
    rule: str


def option_block(options: Sequence[Option]) -> str:
    """The options one per line, ``A) text``."""
    return "\n".join(f"{LETTERS[i]}) {o.text}" for i, o in enumerate(options))


def choice_request(
    system: str, question: str, chat: bool, answer_cue: str, params: GenerationParams
) -> Request:
    """The question as a chat (system prompt + user message) or plain-completion request.

    A base model gets the system prompt, the question and ``answer_cue`` to continue."""
    if chat:
        return Request(params=params, messages=chat_messages(system, [], question))
    parts = [system, question, answer_cue] if system else [question, answer_cue]
    return Request(params=params, prompt="\n\n".join(parts[:-1]) + "\n" + parts[-1])


def _plain(completion: str) -> str:
    """The completion without code-fence lines, bold/italic stars and backticks."""
    lines = [line for line in completion.split("\n") if not line.lstrip().startswith("```")]
    return "\n".join(lines).replace("*", "").replace("`", "").strip()


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def _occurs(needle: str, haystack: str) -> bool:
    """``needle`` in ``haystack`` as a whole word (not inside a longer word or number)."""
    return bool(re.search(rf"(?<![\w.]){re.escape(needle)}(?!\.?\w)", haystack))


def _letter(text: str, n_options: int) -> Choice | None:
    for rule, pattern, search in (
        ("letter", _LONE, re.fullmatch),
        ("letter", _LEADING, re.match),
        ("named_letter", _NAMED, re.search),
    ):
        found = search(pattern, text)
        if found:
            index = LETTERS.index(found[1])
            return Choice(index if index < n_options else None, rule)
    return None


def _only(indices: list[int], rule: str) -> Choice | None:
    return Choice(indices[0], rule) if len(indices) == 1 else None


def _by_value(text: str, options: Sequence[Option]) -> Choice | None:
    first = text.split("\n", 1)[0].strip()
    bare = re.sub(r"^[^=:]*[=:]", "", first).strip().strip("\"'").casefold()
    exact = [i for i, o in enumerate(options) if o.value and values_match(bare, o.value.casefold())]
    found = _only(exact, "value")
    if found:
        return found
    squashed = _squash(text)
    words = [i for i, o in enumerate(options) if o.value and _occurs(_squash(o.value), squashed)]
    return _only(words, "value")


def parse_choice(completion: str, options: Sequence[Option]) -> Choice:
    """The option the completion picks (see the module docstring for the rules)."""
    text = _plain(completion)
    if not text:
        return Choice(None, UNPARSEABLE)
    by_letter = _letter(text, len(options))
    if by_letter is not None:
        return by_letter if by_letter.index is not None else Choice(None, UNPARSEABLE)
    squashed = _squash(text)
    texts = [i for i, o in enumerate(options) if _occurs(_squash(o.text), squashed)]
    found = _only(texts, "option_text") or _by_value(text, options)
    return found or Choice(None, UNPARSEABLE)
