"""The partial memorizer: a reference model that knows a seeded share of each file's rows
verbatim and answers every other question with another reference model, its ``rest``: the
learner (the default), the forest learner, or chance.

Real contamination is partial (in Bordt et al. 2024, GPT-3.5 reproduced 16 of 164 Wine rows),
so this is the positive that measures a test's power: a test that finds the full memorizer but
not a model that knows a fifth of the rows answers little. ``rows="random"`` knows a seeded
random share ``recall`` of each file's rows; ``rows="first"`` knows the first ``recall`` share of
each file (the pattern the papers found on Adult and California Housing: the header and the
first rows, no random row). Both know every header. Which rows are known depends on the seed
and the dataset's name alone, so every test of a run meets the same rows.

What it does not know, ``rest`` answers: ``"learner"`` (``oracle-learner``: the data's
distribution by nearest neighbours, the model the baselines share, so power is a best case),
``"forest"`` (``oracle-forest``: the distribution by cross-fitted random forests, a family no
baseline uses) or ``"chance"`` (as ``oracle-null``: made-up values and rows, a random option
letter). Where the text below says "the learner", read the rest.

The row a prompt asks about decides who answers:

- CSV text is written verbatim from where the prompt stops for as long as the rows it reaches
  are known (the row the prompt breaks off in included); from the first unknown row on, the
  learner continues the prompt and the verbatim text.
- A feature question gets the known row's value when a known row agrees with every value shown,
  else the learner's answer.
- A multiple-choice question gets the option that agrees fully with a known row (with the
  values shown outside the options), else the learner's choice.
- An observation request gets a known row (the one agreeing with the values the prompt fixes,
  or, with none fixed, a known row drawn by seed with probability ``recall``), else the
  learner's draw (with ``volunteers=False``, every observation request without fixed values
  is the learner's). Name questions get the dataset's name whatever the rest: a model that
  has read part of a file knows its name.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tabmem.data.dataset import Dataset
from tabmem.llm.oracle.forest import ForestOracle
from tabmem.llm.oracle.learner import LearnerOracle
from tabmem.llm.oracle.models import (
    _DEFAULT_STYLE,
    _OPTION,
    MemorizerOracle,
    NullOracle,
    Oracle,
    _Found,
    _lead,
    _Match,
    _Table,
    choice_options,
)

KNOWN_ROWS = ("random", "first")
RESTS: dict[str, type[Oracle]] = {
    "learner": LearnerOracle,
    "forest": ForestOracle,
    "chance": NullOracle,
}
"""Who answers what the partial memorizer does not know, by the name ``recall.rest`` gives."""
_ID = re.compile(
    r"^oracle-partial-(random|first)-([0-9]*\.?[0-9]+)-s([0-9]+)(?:-(forest|chance))?(-quiet)?$"
)


@dataclass(frozen=True)
class Recall:
    """Which rows a partial memorizer knows: a share of each file, random or the first ones."""

    share: float
    seed: int
    rows: str = "random"
    rest: str = "learner"
    volunteers: bool = True
    """Whether known rows come back unasked: an observation request gets a known row in a
    ``share`` of answers. A real model that memorized a few rows mostly does not write them
    when asked for a plausible record; ``False`` (``…-quiet``) leaves every observation
    request to the rest, so the sample test finds nothing beyond it."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"recall must be between 0 and 1, not {self.share}")
        if self.rows not in KNOWN_ROWS:
            raise ValueError(f"known rows must be one of {', '.join(KNOWN_ROWS)}, not {self.rows}")
        if self.rest not in RESTS:
            raise ValueError(f"the rest must be one of {', '.join(RESTS)}, not {self.rest}")

    @property
    def model_id(self) -> str:
        """The model name the oracle server answers to, e.g. ``oracle-partial-random-0.2-s0``
        (the rest is named only when it is not the learner: ``…-s0-chance``; a partial
        memorizer that volunteers no row ends in ``-quiet``)."""
        rest = "" if self.rest == "learner" else f"-{self.rest}"
        quiet = "" if self.volunteers else "-quiet"
        return f"oracle-partial-{self.rows}-{self.share:g}-s{self.seed}{rest}{quiet}"

    @property
    def rest_label(self) -> str:
        """The rest as the calibration tables name it: ``forest``, or ``forest-quiet`` for a
        partial memorizer that volunteers no row."""
        return self.rest if self.volunteers else f"{self.rest}-quiet"

    @classmethod
    def of_rest(cls, share: float, seed: int, label: str) -> Recall:
        """A random share's recall with the rest a ``rest_label`` names."""
        rest = label.removesuffix("-quiet")
        return cls(share, seed, "random", rest, volunteers=rest == label)

    @classmethod
    def parse(cls, model_id: str) -> Recall | None:
        """The recall a model name stands for, or None when it is no partial memorizer's."""
        found = _ID.match(model_id)
        if found is None:
            return None
        return cls(float(found[2]), int(found[3]), found[1], found[4] or "learner", not found[5])

    def known(self, dataset: str, n_rows: int) -> frozenset[int]:
        """The data rows (0-based) of ``dataset`` known verbatim."""
        count = round(self.share * n_rows)
        if self.rows == "first":
            return frozenset(range(count))
        return frozenset(random.Random(f"{self.seed}:{dataset}").sample(range(n_rows), count))


class _Known:
    """One table's known rows, as indices and as a mask over the code matrix."""

    def __init__(self, table: _Table, recall: Recall) -> None:
        self.table = table
        self.rows = recall.known(table.dataset.name, len(table.raw_rows))
        self.order = sorted(self.rows)

    @cached_property
    def mask(self) -> np.ndarray:
        mask = np.zeros(len(self.table.raw_rows), dtype=bool)
        mask[self.order] = True
        return mask


class PartialOracle(Oracle):
    """Knows ``recall`` of each file's rows verbatim; answers as its rest otherwise."""

    model_name = "oracle-partial"
    version = "1"

    def __init__(self, datasets: Sequence[Dataset], recall: Recall) -> None:
        super().__init__(datasets)
        self.recall = recall
        self.rest = RESTS[recall.rest](datasets)
        self._memory = MemorizerOracle(datasets)
        self._known = {id(t): _Known(t, recall) for t in self._memory._tables}

    @classmethod
    def version_for(cls, recall: Recall) -> str:
        """The cache version of a partial memorizer: its own, and its rest's when that is not
        the learner (so a changed forest is never served from the cache)."""
        if recall.rest == "learner":
            return cls.version
        return f"{cls.version}+{recall.rest}{RESTS[recall.rest].version}"

    def _draft(
        self, prompt: str, rng: random.Random, budget: int, chat: bool, temperature: float
    ) -> str:
        memory, rest = self._memory, self.rest
        if choice_options(prompt):
            letter = self._known_choice(prompt, rng, chat)
            return letter or rest._draft(prompt, rng, budget, chat, temperature)
        name = memory._name_answer(prompt)
        if name is not None:
            return name
        found = memory._find_pairs(prompt)
        if found and found.question:
            value = self._known_value(found)
            if value is None:
                return rest._draft(prompt, rng, budget, chat, temperature)
            return _lead(prompt, chat) + value
        match = memory._longest_match(prompt)
        if match and memory._is_csv(prompt, match):
            verbatim = self._verbatim(match, budget)
            if len(verbatim) >= budget or not verbatim:
                return verbatim or rest._draft(prompt, rng, budget, chat, temperature)
            after = rest._draft(prompt + verbatim, rng, budget - len(verbatim), chat, temperature)
            return verbatim + after
        return self._observation(prompt, found, rng) or rest._draft(
            prompt, rng, budget, chat, temperature
        )

    def _known_value(self, found: _Found) -> str | None:
        """The asked value of a known row agreeing with every shown value, or None."""
        asked = found.question.name if found.question else ""
        given = {p.name: p.value for p in found.pairs if p.value and p.name != asked}
        rows = found.table.holding(given, self._known[id(found.table)].mask)
        return found.table.clean_rows[rows[0]][found.table.column(asked)] if rows else None

    def _known_choice(self, prompt: str, rng: random.Random, chat: bool) -> str | None:
        """The letter of an option that agrees fully with a known row, or None."""
        options = choice_options(prompt)
        context = _OPTION.sub("", prompt)
        found = self._memory._find_pairs("\n".join([context, *(text for _, text in options)]))
        if found is None:
            return None
        table, known = found.table, self._known[id(found.table)]
        base = {p.name: p.value for p in table.pairs(context)}
        full = []
        for letter, text in options:
            values = {**base, **{p.name: p.value for p in table.pairs(text)}}
            size = sum(1 for v in values.values() if v)
            if size and table.agreement(values, known.order) == size:
                full.append(letter)
        return _lead(prompt, chat) + rng.choice(full) if full else None

    def _verbatim(self, match: _Match, budget: int) -> str:
        """The file's text from where the prompt stops to the end of the run of known rows,
        ``budget`` characters at most."""
        table, known = match.table, self._known[id(match.table)].rows
        text, start = table.text, match.text_end
        end, row = start, table.lines_before(start) - 1  # row -1: the header, always known
        while end < len(text) and end - start < budget and (row < 0 or row in known):
            line_end = text.find("\n", end)
            end, row = (len(text) if line_end < 0 else line_end + 1), row + 1
        return text[start : min(end, start + budget)]

    def _observation(self, prompt: str, found: _Found | None, rng: random.Random) -> str:
        """A known row as an observation, or "" when the rest answers."""
        table = found.table if found else self._memory._identify(prompt)
        if table is None:
            return ""
        known = self._known[id(table)]
        style = found.style if found else _DEFAULT_STYLE
        fixed = {p.name: p.value for p in found.pairs if p.value} if found else {}
        if fixed:
            rows = table.holding(fixed, known.mask)
            return table.observation(table.clean_rows[rows[0]], style) if rows else ""
        if self.recall.volunteers and known.order and rng.random() < self.recall.share:
            return table.observation(table.clean_rows[rng.choice(known.order)], style)
        return ""
