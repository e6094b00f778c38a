"""Reference ("oracle") models with known answers, to check that the tests tell them apart.

- ``MemorizerOracle`` has every dataset's canonical file by heart: the upper reference.
- ``MarginalOracle`` knows the feature names and each feature's marginal distribution, but no
  rows: knowledge without memorization.
- ``NullOracle`` knows nothing and makes plausible text up: the lower reference.
- ``LearnerOracle`` (``tabmem.llm.oracle.learner``) knows each dataset's joint distribution
  but none of the rows it is asked about: the hard negative.
- ``CopulaOracle`` (``tabmem.llm.oracle.copula_learner``) knows the same through Gaussian
  copulas of the file: the second hard negative.
- ``ForestOracle`` (``tabmem.llm.oracle.forest``) knows the same through cross-fitted random
  forests, a model family that no data-only baseline uses: the third hard negative.

Each oracle reads one prompt text (for chat, the last user message: the system prompt and
few-shot turns are ignored, so examples from other datasets cannot confuse it) and handles three
kinds of prompt, checked in this order:

0. A multiple-choice question: two or more lines ``A) text``, ``B) text``, … in letter order.
   The answer is the letter of the option the oracle scores highest (ties drawn by seed): the
   memorizer, the option that, with the ``Name = value`` pairs outside the options, agrees with
   a real row on the most values; the marginal oracle, the option whose values are most frequent
   in the file; the null oracle, any letter.
1. A feature question: the prompt ends with ``Name =`` (or ``Name:``) for a feature, usually
   after ``Name = value`` pairs (one per line, or joined by ", ") describing a row. The answer is
   one value, with a leading space when it continues the prompt's last line. A pair may follow
   ``IF`` or ``THEN`` (``IF a = 1, b = 2, THEN c =``, the few-shot prediction form).
2. A CSV continuation: the prompt ends with CSV text of a dataset, maybe cut mid-field.
3. An observation request: the prompt names a dataset (by its header, its feature names or its
   name) without CSV text. The answer is one observation as ``Name = value`` pairs, in the pair
   style the prompt uses (``" = "`` and ``", "`` when it shows none).

Before these, the memorizer and the marginal oracle answer a name question: the prompt's last
line mentions "dataset" and "name" and ends with ``?`` or ``:``, and the prompt shows a dataset
(as in 3). The answer is the dataset's best-known name (its first alias, else its config name):
both know the dataset; the null oracle does not and handles the prompt as above.

Answers are deterministic given the prompt and the seed (temperature is ignored; vary the seed to
draw other samples). They are cut at the first stop sequence and after ``4 * max_tokens``
characters: an oracle token is 4 characters.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar, Generic, Protocol, TypeVar

import numpy as np

from tabmem.data.csvtext import raw_fields
from tabmem.data.dataset import Dataset

CHARS_PER_TOKEN = 4
"""An oracle token is 4 characters: ``max_chars = 4 * max_tokens``."""

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_NUMBER = re.compile(r"-?(\d*)(?:\.(\d+))?")
_DEFAULT_STYLE = (" = ", ", ")
_OPTION = re.compile(r"^[ \t]*([A-J])\)[ \t]+(.*?)[ \t]*$", re.M)


@dataclass(frozen=True)
class OracleAnswer:
    """An oracle's completion and why it ended: ``"stop"`` (done, or a stop sequence) or
    ``"length"`` (``max_tokens`` reached)."""

    text: str
    finish_reason: str


def rng_for(prompt_text: str, seed: int) -> random.Random:
    """A random generator determined by the prompt and the seed alone."""
    key = f"{seed}\x00{prompt_text}".encode("utf-8", "surrogatepass")
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:16], "big"))


def _cut(draft: str, stop: Iterable[str], max_chars: int) -> OracleAnswer:
    """Cut ``draft`` where a model stops: before the first stop sequence, or at ``max_chars``."""
    visible = draft[:max_chars]
    cuts = [at for at in (visible.find(s) for s in stop if s) if at >= 0]
    if cuts:
        return OracleAnswer(visible[: min(cuts)], "stop")
    return OracleAnswer(visible, "length" if len(draft) > max_chars else "stop")


def message_text(message: Mapping[str, object]) -> str:
    """A chat message's text, whether its content is a string or a list of text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def last_user_text(messages: Sequence[Mapping[str, object]]) -> str | None:
    """The last user message's text, or None if there is no user message."""
    users = [m for m in messages if m.get("role") == "user"]
    return message_text(users[-1]) if users else None


def _clean(field: str) -> str:
    """A raw CSV field as a value: surrounding whitespace and quotes removed."""
    value = field.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].replace('""', '"')
    return value


def _norm(value: str) -> str:
    """A value as compared with a row's value: numbers by their float value, text as-is."""
    value = _clean(value)
    try:
        return repr(float(value))
    except ValueError:
        return value


def _lines(prompt: str) -> tuple[list[str], str]:
    """The prompt's complete lines (terminators removed) and its last, unfinished line."""
    *complete, partial = prompt.split("\n")
    return [line.removesuffix("\r") for line in complete], partial


def _lead(prompt: str, chat: bool) -> str:
    """The space a one-value answer needs when it continues the prompt's last line."""
    return "" if chat or not prompt or prompt[-1].isspace() else " "


_SETTLED: ContextVar[Callable[[str], bool] | None] = ContextVar("settled", default=None)
"""The ``settled`` test of the ``Oracle.answer`` call being drafted (None: write to the budget)."""


def settled(parts: Sequence[str]) -> bool:
    """Whether the draft written so far (``parts`` joined) settles the answer for the caller of
    ``Oracle.answer``: rows written after it would be cut away, so the draft ends there."""
    rule = _SETTLED.get()
    return rule is not None and rule("".join(parts))


def _rows_until(first: str, make_row: Callable[[], str], newline: str, budget: int) -> str:
    """``first`` followed by generated rows, each ending in ``newline``, until ``budget`` chars
    or until the draft is ``settled``."""
    parts, size = [first], len(first)
    while size < budget and not settled(parts):
        row = make_row() + newline
        parts.append(row)
        size += len(row)
    return "".join(parts)


def next_counts(counters: Mapping[int, int], delimiter: str, shown: str) -> dict[int, int]:
    """The next value of each counter column (index -> the file's first count) after the
    prompt's last complete row ``shown``; the first count where that row has none."""
    fields = raw_fields(shown, delimiter) if shown else []
    counts = {}
    for j, first in counters.items():
        value = fields[j].strip() if j < len(fields) else ""
        counts[j] = int(value) + 1 if value.isdigit() else first
    return counts


def choice_options(prompt: str) -> list[tuple[str, str]]:
    """The prompt's multiple-choice options as (letter, text): lines ``A) text``, ``B) text``, …
    in letter order from A, two at least; [] when the prompt has none."""
    options = [(m[1], m[2]) for m in _OPTION.finditer(prompt)]
    letters = "".join(letter for letter, _ in options)
    return options if len(options) >= 2 and "ABCDEFGHIJ".startswith(letters) else []


@dataclass(frozen=True)
class _Pair:
    """One ``Name = value`` pair found in a prompt; ``open`` marks a final ``Name =`` question."""

    name: str
    value: str
    sep: str
    after_comma: bool
    open: bool


@dataclass(frozen=True)
class _Found:
    """The dataset whose feature names the prompt's pairs use, and those pairs."""

    table: _Table
    pairs: list[_Pair]

    @property
    def question(self) -> _Pair | None:
        return self.pairs[-1] if self.pairs[-1].open else None

    @property
    def style(self) -> tuple[str, str]:
        """(separator, joiner) of the prompt's pairs, e.g. (" = ", ", ") or (": ", "\\n")."""
        full = [p for p in self.pairs if p.value]
        sep = full[0].sep if full else _DEFAULT_STYLE[0]
        joiner = "\n" if len(self.pairs) > 1 and not self.pairs[1].after_comma else ", "
        return sep, joiner


def seen_part(dataset: Dataset) -> Dataset:
    """What the oracles were trained on: all of a file, except for a series whose config sets
    ``oracle_knows_until`` (an ISO date), of which they know the rows dated up to it only, as if
    their training had stopped then (so ``test=forecast`` has a memorizer with a cutoff)."""
    until = dataset.spec.extra.get("oracle_knows_until")
    if not until:
        return dataset
    kept = [r for r in dataset.rows if _clean(raw_fields(r, dataset.delimiter)[0]) <= str(until)]
    text = dataset.newline.join([dataset.header, *kept]) + dataset.newline
    return Dataset(spec=dataset.spec, path=dataset.path, text=text)


class _Table:
    """One dataset as the oracles see it: exact text, raw and clean fields, feature names."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self.text = dataset.text
        self.delimiter = dataset.delimiter
        self.newline = dataset.newline
        self.header = dataset.header
        self.names = [name.strip() for name in dataset.feature_names]
        self.aliases = (dataset.name, *dataset.spec.aliases)

    @cached_property
    def raw_rows(self) -> list[list[str]]:
        return [raw_fields(row, self.delimiter) for row in self.dataset.rows]

    @cached_property
    def _newlines(self) -> list[int]:
        return [m.start() for m in re.finditer("\n", self.text)]

    def lines_before(self, end: int) -> int:
        """How many newlines ``text`` holds before position ``end``: ``text.count("\\n", 0,
        end)`` by bisection (counting again on every request cost a millisecond on adult)."""
        return bisect_left(self._newlines, end)

    @cached_property
    def raw_columns(self) -> list[list[str]]:
        return [list(column) for column in zip(*self.raw_rows, strict=False)]

    @cached_property
    def raw_sets(self) -> list[set[str]]:
        return [set(column) for column in self.raw_columns]

    @cached_property
    def clean_rows(self) -> list[list[str]]:
        return [[_clean(field) for field in row] for row in self.raw_rows]

    @cached_property
    def clean_columns(self) -> list[list[str]]:
        return [[_clean(field) for field in column] for column in self.raw_columns]

    @cached_property
    def norm_rows(self) -> list[list[str]]:
        return [[_norm(field) for field in row] for row in self.raw_rows]

    @cached_property
    def _alternation(self) -> str:
        names = sorted({n for n in self.names if n}, key=len, reverse=True)
        return "|".join(re.escape(n) for n in names) or r"(?!)"

    @cached_property
    def _name_re(self) -> re.Pattern[str]:
        return re.compile(rf"(?<!\w)(?:{self._alternation})(?!\w)")

    @cached_property
    def _pair_re(self) -> re.Pattern[str]:
        return re.compile(
            rf"(?:^|(?<=,))[ \t]*(?:(?:IF|THEN)[ \t]+)?(?P<name>{self._alternation})"
            r"(?P<sep>[ \t]*[=:][ \t]*)",
            re.M,
        )

    def column(self, name: str) -> int:
        return self.names.index(name)

    def by_column(self, pairs: Sequence[_Pair], skip: str | None = None) -> dict[int, str]:
        """The pairs' values (but ``skip``'s and the empty ones) by column index."""
        return {self.column(p.name): p.value for p in pairs if p.value and p.name != skip}

    def names_in(self, prompt: str) -> int:
        """How many of this dataset's feature names the prompt mentions."""
        return len(set(self._name_re.findall(prompt)))

    def pairs(self, prompt: str) -> list[_Pair]:
        """The ``Name = value`` pairs in the prompt whose names are this dataset's features."""
        matches = list(self._pair_re.finditer(prompt))
        pairs = []
        for i, m in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(prompt)
            region = prompt[m.end() : end]
            value = region.split("\n", 1)[0].strip().removesuffix(",").strip()
            after_comma = m.start() > 0 and prompt[m.start() - 1] == ","
            is_open = i == len(matches) - 1 and not region.strip()
            pairs.append(_Pair(m["name"], value, m["sep"], after_comma, is_open))
        return pairs

    def codes_of(self, values: Iterable[tuple[str, str]]) -> list[tuple[int, int]]:
        """The (name, value) pairs given of this table's features, empty values left out, as
        (column, code) pairs of the code matrix (code -1: a value no row holds)."""
        maps = self._codes[0]
        shown = [(self.column(n), _norm(v)) for n, v in values if v and n in self.names]
        return [(j, maps[j].get(v, -1)) for j, v in shown]

    def best_row(self, pairs: Sequence[_Pair], skip: str | None = None) -> int:
        """The first row agreeing with the most of the given (non-empty) values."""
        matrix = self._codes[1]
        known = self.codes_of((p.name, p.value) for p in pairs if p.name != skip)
        if not known or not matrix.size:
            return 0
        # argmax returns the first of equal counts, as max over the rows in order did.
        return int(sum(matrix[:, j] == code for j, code in known).argmax())

    @cached_property
    def _codes(self) -> tuple[list[dict[str, int]], np.ndarray]:
        """Each column's normalised values as integer codes, and the rows as a code matrix."""
        width = len(self.names)
        maps: list[dict[str, int]] = [{} for _ in range(width)]
        rows = [(row + [""] * width)[:width] for row in self.norm_rows]
        codes = [[maps[j].setdefault(v, len(maps[j])) for j, v in enumerate(r)] for r in rows]
        return maps, np.array(codes, dtype=np.int64).reshape(len(rows), width)

    def agreement(self, values: Mapping[str, str], rows: Sequence[int] | None = None) -> int:
        """The most of the given (non-empty) values that one real row (of ``rows``, where
        given) shares."""
        matrix = self._codes[1] if rows is None else self._codes[1][rows]
        known = self.codes_of(values.items())
        if not known or not matrix.size:
            return 0
        return int(sum(matrix[:, j] == code for j, code in known).max())

    def holding(self, values: Mapping[str, str], among: np.ndarray) -> list[int]:
        """The rows ``among`` a mask that hold every given (non-empty) value; [] where no
        value is given."""
        known = self.codes_of(values.items())
        agree = among.copy()
        for j, code in known:
            agree &= self._codes[1][:, j] == code
        return np.flatnonzero(agree).tolist() if known else []

    @cached_property
    def _norm_counts(self) -> list[dict[str, int]]:
        counts: list[dict[str, int]] = [{} for _ in self.names]
        for row in self.norm_rows:
            for j, value in enumerate(row[: len(counts)]):
                counts[j][value] = counts[j].get(value, 0) + 1
        return counts

    def log_share(self, name: str, value: str) -> float:
        """log of the (add-one smoothed) share of rows whose ``name`` is ``value``."""
        counts = self._norm_counts[self.column(name)]
        return math.log((counts.get(_norm(value), 0) + 1) / (len(self.norm_rows) + 1))

    def observation(self, values: Sequence[str], style: tuple[str, str]) -> str:
        sep, joiner = style
        return joiner.join(
            f"{name}{sep}{value}" for name, value in zip(self.names, values, strict=False)
        )


class Oracle(ABC):
    """What all oracles share: the datasets they know, the answer cut, the prompt kinds."""

    model_name: ClassVar[str]
    version: ClassVar[str] = "1"
    """Part of the model's cache identity: raise it when the oracle's answers change."""

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        self._tables = [_Table(seen_part(d)) for d in datasets if d.rows]
        self._recent_matches: dict[tuple[bool, ...], tuple[_Tail, ...]] = {}

    def generate(
        self,
        prompt_text: str,
        max_tokens: int,
        stop: Sequence[str],
        seed: int,
        temperature: float = 0.0,
        *,
        chat: bool = False,
    ) -> str:
        """The completion of ``prompt_text``; see ``answer``."""
        return self.answer(prompt_text, max_tokens, stop, seed, temperature, chat=chat).text

    def answer(
        self,
        prompt_text: str,
        max_tokens: int,
        stop: Sequence[str],
        seed: int,
        temperature: float = 0.0,
        *,
        chat: bool = False,
        settled: Callable[[str], bool] | None = None,
    ) -> OracleAnswer:
        """The completion and its finish reason; ``temperature`` is ignored (vary ``seed``).

        ``chat`` says the text is a user message, so a one-value answer gets no leading space.
        ``settled`` says when a draft's score can no longer change (a stop rule's end, for a
        caller that cuts the answer there): CSV rows are written until it holds, not to the
        budget. The answer is then a prefix of the full one that the caller cuts alike, and
        the rows after it (and the draws they take) are never computed.
        """
        max_chars = CHARS_PER_TOKEN * max(max_tokens, 0)
        token = _SETTLED.set(settled)
        try:
            draft = self._draft(
                prompt_text, rng_for(prompt_text, seed), max_chars + 1, chat, temperature
            )
        finally:
            _SETTLED.reset(token)
        return _cut(draft, stop, max_chars)

    @abstractmethod
    def _draft(
        self, prompt: str, rng: random.Random, budget: int, chat: bool, temperature: float
    ) -> str:
        """The uncut answer; generated text needs to run only ``budget`` characters long.
        Only the learners heed ``temperature``; the others vary their answers by seed."""

    def _choice(self, prompt: str, rng: random.Random, chat: bool) -> str | None:
        """The letter of the best-scoring option if the prompt is a multiple-choice question."""
        options = choice_options(prompt)
        if not options:
            return None
        context = _OPTION.sub("", prompt)
        found = self._find_pairs("\n".join([context, *(text for _, text in options)]))
        table = found.table if found else None
        scores = self._option_scores(table, context, [text for _, text in options])
        best = [letter for (letter, _), s in zip(options, scores, strict=True) if s == max(scores)]
        return _lead(prompt, chat) + rng.choice(best)

    def _option_scores(self, table: _Table | None, context: str, options: list[str]) -> list[float]:
        """How strongly this oracle prefers each option (higher: more)."""
        return [self._option_score(table, context, option) for option in options]

    def _option_score(self, table: _Table | None, context: str, option: str) -> float:
        """How strongly this oracle prefers an option; the base oracle has no preference."""
        return 0.0

    def _find_pairs(self, prompt: str) -> _Found | None:
        """The dataset with the most feature names among the prompt's pairs, and those pairs."""
        best: _Found | None = None
        best_count = 0
        for table in self._tables:
            pairs = table.pairs(prompt)
            count = len({p.name for p in pairs})
            if count > best_count:
                best, best_count = _Found(table, pairs), count
        return best

    def _identify(self, prompt: str) -> _Table | None:
        """The dataset the prompt is about: by its header, else its feature names, else its name."""
        by_header = [(prompt.rfind(t.header), t) for t in self._tables if t.header in prompt]
        if by_header:
            return max(by_header, key=lambda pair: pair[0])[1]
        counted = [(t.names_in(prompt), t) for t in self._tables]
        counted = [(n, t) for n, t in counted if n >= 2 and 2 * n >= len(t.names)]
        if counted:
            return max(counted, key=lambda pair: pair[0])[1]
        named = [(self._last_mention(prompt, t.aliases), t) for t in self._tables]
        named = [(at, t) for at, t in named if at >= 0]
        return max(named, key=lambda pair: pair[0])[1] if named else None

    def _name_answer(self, prompt: str) -> str | None:
        """The shown dataset's best-known name if the prompt ends with a name question."""
        last = prompt.rstrip().rsplit("\n", 1)[-1].strip().lower()
        words = set(re.findall(r"[a-z]+", last))
        if not last.endswith(("?", ":")) or not {"dataset", "name"} <= words:
            return None
        table = self._identify(prompt)
        if table is None:
            return None
        spec = table.dataset.spec
        return spec.aliases[0] if spec.aliases else spec.name

    def _longest_match(self, prompt: str) -> _Match | None:
        """The longest suffix of the prompt found in some file (a binary search on its length).

        Among files holding it, one whose header is in the prompt wins, then the first; within
        the file, the first occurrence. A suffix of length L found and L + 1 not found settles
        the answer for every prompt that ends with the same L + 1 characters and shows the
        same headers, so recent answers are kept by that tail: the 1000 prompts of a sample
        test, which share their last lines, are searched once.
        """
        headers_shown = tuple(t.header in prompt for t in self._tables)
        recent = self._recent_matches.get(headers_shown, ())
        for tail in recent:
            if prompt.endswith(tail.text):
                return tail.match(prompt)
        found = self._search_longest_match(prompt, headers_shown)
        present = 0 if found is None else len(prompt) - found.prompt_start
        if present < len(prompt):
            tail = _Tail(prompt[-present - 1 :], found)
            self._recent_matches[headers_shown] = (tail, *recent[: _RECENT_TAILS - 1])
        return found

    def _search_longest_match(self, prompt: str, headers_shown: tuple[bool, ...]) -> _Match | None:
        shown = [t for t, s in zip(self._tables, headers_shown, strict=True) if s]
        tables = shown + [t for t in self._tables if t not in shown]

        def holder(length: int) -> _Table | None:
            # A file without a suffix holds no longer one: once a suffix is found, the files
            # before its holder and those after it without it are not searched again.
            suffix = prompt[len(prompt) - length :]
            for at, table in enumerate(tables):
                if suffix in table.text:
                    tables[:] = [table, *(t for t in tables[at + 1 :] if suffix in t.text)]
                    return table
            return None

        # Invariant: the suffix of length `present` is found; the one of length `absent` is not.
        present, absent = 0, min(len(prompt), max((len(t.text) for t in tables), default=0))
        if absent and holder(absent):
            present = absent
        while absent - present > 1:
            middle = (present + absent) // 2
            if holder(middle):
                present = middle
            else:
                absent = middle
        table = holder(present) if present else None
        if table is None:
            return None
        start = len(prompt) - present
        return _Match(table, start, table.text.find(prompt[start:]) + present)

    def _rows_after_cut(self, table: _Table, prompt: str, budget: int) -> list[int]:
        """The file's rows a CSV prompt asks for: from where its text stops in ``table``'s
        file, as many rows as the answer budget can hold (none if the text is not the file's)."""
        match = self._longest_match(prompt)
        if match is None or match.table is not table or not self._is_csv(prompt, match):
            return []
        text = table.text
        first = max(0, table.lines_before(match.text_end) - 1)
        rows = len(table.raw_rows)
        span = budget // max(1, len(text) // (rows + 1)) + 2
        return list(range(first, min(rows, first + span)))

    @staticmethod
    def _is_csv(prompt: str, match: _Match) -> bool:
        """Whether the matched suffix is CSV text rather than a chance overlap with prose: it
        begins a prompt line and the file, or holds the delimiter and begins or spans a line."""
        matched = prompt[match.prompt_start :]
        at_line_start = match.prompt_start == 0 or prompt[match.prompt_start - 1] == "\n"
        if at_line_start and match.text_end == len(matched):
            return True
        spans_line = "\n" in matched.rstrip("\r\n")
        return match.table.delimiter in matched and (at_line_start or spans_line)

    def _header_cut(self, partial: str) -> _Table | None:
        """The dataset whose header the prompt's last line begins (3 characters at least)."""
        if len(partial) < 3:
            return None
        return next(
            (t for t in self._tables if t.header.startswith(partial) and t.header != partial), None
        )

    def _csv_table(self, complete: list[str], partial: str) -> _Table | None:
        """The dataset whose CSV text the prompt ends with: the one of the last header line in
        the prompt, else the one whose columns hold half or more of the last row's fields."""
        for line in reversed([*complete, partial]):
            table = next((t for t in self._tables if line and line == t.header), None)
            if table:
                return table
        last = next((line for line in reversed(complete) if line.strip()), "")
        scored = []
        for table in self._tables:
            fields = raw_fields(last, table.delimiter)
            if len(fields) == len(table.raw_sets):
                hits = sum(f in values for f, values in zip(fields, table.raw_sets, strict=True))
                scored.append((hits / len(fields), table))
        scored = [(score, t) for score, t in scored if score >= 0.5]
        return max(scored, key=lambda pair: pair[0])[1] if scored else None

    @staticmethod
    def _last_mention(prompt: str, names: Iterable[str]) -> int:
        """Where the last mention of any of ``names`` (as a whole word, any case) starts, or -1."""
        starts = [
            m.start()
            for name in names
            if name
            for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", prompt, re.I)
        ]
        return max(starts, default=-1)


@dataclass(frozen=True)
class _Match:
    """The prompt's longest suffix found in a dataset's text, and where it occurs there."""

    table: _Table
    prompt_start: int
    text_end: int


_RECENT_TAILS = 32
"""Prompt tails whose longest match an oracle keeps, per set of headers shown."""


@dataclass(frozen=True)
class _Tail:
    """A prompt's longest match found in a file (or none) and the one character more that
    was not found: any prompt ending with ``text`` has the same match."""

    text: str
    found: _Match | None

    def match(self, prompt: str) -> _Match | None:
        if self.found is None:
            return None
        matched = len(self.text) - 1
        return _Match(self.found.table, len(prompt) - matched, self.found.text_end)


@dataclass(frozen=True)
class _CsvEnd:
    """Where a prompt's CSV text stops in ``table``'s file: in a header cut short (``head``:
    the header's rest and a line end) or in rows (``shown``: the last complete line;
    ``partial``: the row begun)."""

    table: _Table
    head: str
    shown: str
    partial: str


@dataclass(frozen=True)
class _RowRequest:
    """A row for a fitted oracle to write: the ``fixed`` values (column -> value) and the
    counter columns' ``counts`` kept, the ``typed`` beginning of one field (column, text)
    kept, none of the ``asked`` rows used; greedy without ``draw``."""

    fixed: Mapping[int, str]
    asked: Collection[int]
    draw: random.Random | None
    typed: tuple[int, str] | None = None
    counts: Mapping[int, int] = field(default_factory=dict)

    def kept(self, column: int) -> str | None:
        """The field ``column`` is written as where the model does not choose it: its fixed
        value (unless it is the typed one), else its count; None where the model chooses."""
        if column in self.fixed and (self.typed is None or column != self.typed[0]):
            return self.fixed[column]
        if column in self.counts:
            return str(self.counts[column])
        return None

    def prefix(self, column: int) -> str:
        """The typed beginning of ``column``'s field ("" where none is typed)."""
        return self.typed[1] if self.typed and column == self.typed[0] else ""


class FileOracle(Oracle):
    """An oracle that knows files and answers each kind of prompt about one, in this order: a
    multiple-choice question (``_choice``), a question for the dataset's name, a question for
    one value (``_value``), CSV text to continue (``_csv``), and otherwise a record of the file
    identified by the prompt (``_record``). Each oracle says how it answers each kind."""

    def _draft(
        self, prompt: str, rng: random.Random, budget: int, chat: bool, temperature: float
    ) -> str:
        choice = self._choice(prompt, rng, chat)
        if choice is not None:
            return choice
        name = self._name_answer(prompt)
        if name is not None:
            return name
        found = self._find_pairs(prompt)
        if found and found.question:
            return _lead(prompt, chat) + self._value(found, rng, temperature)
        written = self._csv(prompt, rng, budget, temperature)
        if written is not None:
            return written
        table = found.table if found else self._identify(prompt)
        if table is None:
            return ""
        return self._record(table, found, rng, temperature)

    def _csv_end(self, prompt: str) -> _CsvEnd | None:
        """The CSV text the prompt ends in, or None where it ends in none."""
        complete, partial = _lines(prompt)
        table = self._header_cut(partial)
        if table:
            return _CsvEnd(table, table.header[len(partial) :] + table.newline, "", "")
        table = self._csv_table(complete, partial)
        if table:
            shown = next((line for line in reversed(complete) if line.strip()), "")
            return _CsvEnd(table, "", shown, partial)
        return None

    @abstractmethod
    def _value(self, found: _Found, rng: random.Random, temperature: float) -> str:
        """The value of ``found.question`` given the pairs shown."""

    @abstractmethod
    def _csv(self, prompt: str, rng: random.Random, budget: int, temperature: float) -> str | None:
        """The continuation of CSV text (``budget`` characters are enough), or None where the
        prompt ends in none."""

    @abstractmethod
    def _record(
        self, table: _Table, found: _Found | None, rng: random.Random, temperature: float
    ) -> str:
        """A record of ``table`` as an observation, agreeing with the pairs ``found``."""


class FittedModel(Protocol):
    """What a fitted oracle's model of a file says of its rows' shape."""

    @property
    def width(self) -> int:
        """The number of columns."""

    @property
    def counters(self) -> Mapping[int, int]:
        """Columns that count rows, and the first count in the file."""


Known = TypeVar("Known", bound=FittedModel)


class FittedOracle(FileOracle, Generic[Known]):
    """A file oracle that answers from a model fitted to each file (``_fit``, on first use):
    CSV text is continued row by row from the model (``_row``), the first row greedy unless
    the oracle is warm, never writing the rows the prompt asks for."""

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        super().__init__(datasets)
        self._known: dict[int, Known] = {}
        self._lock = threading.Lock()

    def _knowledge(self, table: _Table) -> Known:
        """The model of ``table``, fitted on first use."""
        with self._lock:
            if id(table) not in self._known:
                self._known[id(table)] = self._fit(table)
            return self._known[id(table)]

    @abstractmethod
    def _fit(self, table: _Table) -> Known:
        """The oracle's model of ``table``."""

    @abstractmethod
    def _row(self, known: Known, request: _RowRequest) -> list[str]:
        """The raw fields of the row ``request`` asks for, each given the fields before it."""

    def _csv(self, prompt: str, rng: random.Random, budget: int, temperature: float) -> str | None:
        """The prompt's CSV text continued: a header cut short finished, or the row begun,
        then new rows until ``budget`` characters or a ``settled`` draft; the first row
        written is greedy at temperature 0, the others are draws."""
        end = self._csv_end(prompt)
        if end is None:
            return None
        table, draw = end.table, rng if temperature > 0 else None
        known = self._knowledge(table)
        asked = self._rows_after_cut(table, prompt, budget)
        counts = next_counts(known.counters, table.delimiter, end.shown)
        parts, size = [end.head], len(end.head)
        fields = raw_fields(end.partial, table.delimiter) if end.partial else []
        if fields:
            done = {j: _clean(f) for j, f in enumerate(fields[:-1]) if j < known.width}
            typed = (len(fields) - 1, fields[-1])
            row = self._row(known, _RowRequest(done, asked, draw, typed, counts))
            rest = row[typed[0]][len(typed[1]) :] if typed[0] < known.width else ""
            tail = "".join(table.delimiter + f for f in row[typed[0] + 1 :])
            parts.append(rest + tail + table.newline)
            size += len(parts[-1])
            counts = {j: c + 1 for j, c in counts.items()}
            draw = draw or rng
        while size < budget and not settled(parts):
            row = self._row(known, _RowRequest({}, asked, draw, None, counts))
            parts.append(table.delimiter.join(row) + table.newline)
            size += len(parts[-1])
            counts = {j: c + 1 for j, c in counts.items()}
            draw = draw or rng
        return "".join(parts)


class MemorizerOracle(FileOracle):
    """Knows every dataset's canonical file verbatim.

    CSV text is continued verbatim from the longest suffix of the prompt found in a file, when
    that suffix looks like CSV rather than prose (see ``_is_csv``).
    A feature question is answered from the real row that agrees with the most given values;
    an observation request gets that row, or, with no values given, a real row drawn by seed.
    """

    model_name = "oracle-memorizer"

    def _option_score(self, table: _Table | None, context: str, option: str) -> float:
        """The most values a real row shares with the option and the pairs outside the options."""
        if table is None:
            return 0.0
        values = {p.name: p.value for p in table.pairs(context)}
        values.update({p.name: p.value for p in table.pairs(option)})
        return float(table.agreement(values))

    def _value(self, found: _Found, rng: random.Random, temperature: float) -> str:
        """The asked value of the row that agrees best with the pairs shown."""
        assert found.question is not None
        asked = found.question.name
        row = found.table.best_row(found.pairs, skip=asked)
        return found.table.clean_rows[row][found.table.column(asked)]

    def _csv(self, prompt: str, rng: random.Random, budget: int, temperature: float) -> str | None:
        """The file's own text after the longest end of the prompt found in it."""
        match = self._longest_match(prompt)
        if match and self._is_csv(prompt, match):
            return match.table.text[match.text_end : match.text_end + budget]
        return None

    def _record(
        self, table: _Table, found: _Found | None, rng: random.Random, temperature: float
    ) -> str:
        """The row agreeing best with the pairs shown, or a random row."""
        if found and any(p.value for p in found.pairs):
            return table.observation(table.clean_rows[table.best_row(found.pairs)], found.style)
        return table.observation(
            rng.choice(table.clean_rows), found.style if found else _DEFAULT_STYLE
        )


class MarginalOracle(FileOracle):
    """Knows the feature names and each feature's marginal distribution, no rows.

    CSV text (found by a header line, a header cut short, or a last row whose fields fit a
    dataset's columns) is continued by drawing every field independently from its column's
    raw values in the file, so formats match but real rows come back only by chance. A header
    cut short is completed first. Questions and observation requests get marginal draws too.
    """

    model_name = "oracle-marginal"

    def _option_score(self, table: _Table | None, context: str, option: str) -> float:
        """The sum of the log shares of the option's values in their columns."""
        if table is None:
            return 0.0
        return sum(table.log_share(p.name, p.value) for p in table.pairs(option) if p.value)

    def _value(self, found: _Found, rng: random.Random, temperature: float) -> str:
        """A draw from the asked column."""
        assert found.question is not None
        return rng.choice(found.table.clean_columns[found.table.column(found.question.name)])

    def _csv(self, prompt: str, rng: random.Random, budget: int, temperature: float) -> str | None:
        """A header cut short completed, then rows of independent draws."""
        end = self._csv_end(prompt)
        if end is None:
            return None
        head = end.head or self._finish_row(end.table, end.partial, rng)
        return self._rows(end.table, head, rng, budget)

    def _record(
        self, table: _Table, found: _Found | None, rng: random.Random, temperature: float
    ) -> str:
        """Every field an independent draw from its column."""
        style = found.style if found else _DEFAULT_STYLE
        return table.observation([rng.choice(c) for c in table.clean_columns], style)

    @staticmethod
    def _finish_row(table: _Table, partial: str, rng: random.Random) -> str:
        """The rest of the row ``partial`` began (all of it if empty), with its line end."""
        columns = table.raw_columns
        fields = raw_fields(partial, table.delimiter)
        done, current = len(fields) - 1, fields[-1]
        if done >= len(columns):
            return table.newline
        if current:
            fitting = [v for v in columns[done] if v.startswith(current)]
            rest = rng.choice(fitting)[len(current) :] if fitting else ""
        else:
            rest = rng.choice(columns[done])
        rest += "".join(table.delimiter + rng.choice(c) for c in columns[done + 1 :])
        return rest + table.newline

    @staticmethod
    def _rows(table: _Table, head: str, rng: random.Random, budget: int) -> str:
        """``head`` followed by rows whose fields are independent marginal draws."""
        columns = table.raw_columns

        def make_row() -> str:
            return table.delimiter.join(rng.choice(c) for c in columns)

        return _rows_until(head, make_row, table.newline, budget)


class NullOracle(Oracle):
    """Knows nothing: writes plausible made-up text.

    CSV text (a last complete line with two fields or more) is continued with made-up rows of
    that many fields, numbers where that line has numbers and made-up words elsewhere. A prompt
    ending in ``=`` or ``:`` gets a made-up value; anything else, a line of made-up words.
    """

    model_name = "oracle-null"

    def __init__(self, datasets: Sequence[Dataset] = ()) -> None:
        """The null oracle ignores ``datasets``; it takes them only to build like the others."""
        super().__init__(datasets)

    def _draft(
        self, prompt: str, rng: random.Random, budget: int, chat: bool, temperature: float
    ) -> str:
        choice = self._choice(prompt, rng, chat)
        if choice is not None:
            return choice
        if prompt.rstrip().endswith(("=", ":")):
            return _lead(prompt, chat) + _made_up_like(rng.choice(["0", "word"]), rng)
        complete, partial = _lines(prompt)
        last = next((line for line in reversed(complete) if line.strip()), "")
        delimiter = max(",;\t", key=last.count)
        if last.count(delimiter) == 0:
            return " ".join(_made_up_word(rng) for _ in range(8))
        templates = raw_fields(last, delimiter)
        newline = "\r\n" if "\r\n" in prompt else "\n"
        fields = raw_fields(partial, delimiter)
        done, current = len(fields) - 1, fields[-1]
        head = ""
        if done < len(templates):
            head = _made_up_rest(current, rng) if current else _made_up_like(templates[done], rng)
            head += "".join(delimiter + _made_up_like(t, rng) for t in templates[done + 1 :])
        head += newline

        def make_row() -> str:
            return delimiter.join(_made_up_like(t, rng) for t in templates)

        return _rows_until(head, make_row, newline, budget)


def _made_up_word(rng: random.Random) -> str:
    syllables = rng.randint(2, 3)
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))


def _made_up_like(template: str, rng: random.Random) -> str:
    """A made-up value shaped like ``template``: a number like a number, else a word."""
    lead = template[: len(template) - len(template.lstrip())]
    core = _clean(template)
    number = _NUMBER.fullmatch(core)
    if not number or not any(ch.isdigit() for ch in core):
        word = _made_up_word(rng)
        return lead + (word.capitalize() if core[:1].isupper() else word)
    whole, decimals = number.groups()
    value = str(rng.randrange(10 ** len(whole))) if whole else ""
    if decimals:
        value += "." + "".join(rng.choice("0123456789") for _ in decimals)
    return lead + value


def _made_up_rest(current: str, rng: random.Random) -> str:
    """A made-up end for a field cut short: a digit after a digit, else a letter; closes quotes."""
    rest = str(rng.randrange(10)) if current[-1].isdigit() else rng.choice(_VOWELS)
    return rest + ('"' if current.count('"') % 2 else "")
