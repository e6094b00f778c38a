"""The learner: a reference model that knows each dataset's joint distribution but none of the
rows it is asked about — the hard negative for every test that claims to detect rows seen.

Its knowledge is a nearest-neighbour model of each shipped file (``tabmem.stats.neighbours``):
the values of the rows most similar to what the prompt shows. It never answers from the rows a
prompt asks about: rows that agree with everything the prompt shows of the asked row are left
out when there are few of them (the queried row is among them), and when the prompt is the
file's own CSV text, the rows after the point where the prompt stops are left out too.

- A feature question (``Name =`` after ``Name = value`` pairs) gets, at temperature 0, the most
  likely value given the shown values; at a higher temperature, a draw from the same
  conditional distribution.
- A multiple-choice question gets the option most likely given the rest of the record: for a
  hidden value, the option value's conditional probability; for whole records, the sum over
  their values of each value's probability given the record's other values.
- CSV text is continued with rows written in the file's exact format (the raw text of the
  chosen neighbours' fields): the row the prompt breaks off in is finished, and at temperature
  0 the first row written is the most likely one, field by field; later rows, and every row
  at a higher temperature, are draws. A column that counts rows goes on counting. A draw may
  equal a real row by chance, as a draw from the distribution would; none is filtered out.
- An observation request gets one observation drawn from the distribution (given the values
  the prompt fixes, if any); a name question the dataset's name. The learner knows names and
  distributions: tests of those are expected to find it.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Collection, Mapping, Sequence
from functools import cached_property
from typing import Protocol

import numpy as np

from tabmem.data.copula import is_counter
from tabmem.data.csvtext import raw_fields
from tabmem.data.dataset import Dataset
from tabmem.llm.oracle.models import (
    _DEFAULT_STYLE,
    FittedOracle,
    _clean,
    _Found,
    _Pair,
    _Table,
    next_counts,
    settled,
)
from tabmem.stats.neighbours import NeighbourModel


class ConditionalModel(Protocol):
    """A table's conditional distributions as the learner reads them: rows whose value of the
    asked column is the answer (``NeighbourModel`` is one), and options' log-likelihoods."""

    def pick(
        self,
        target: int,
        given: Mapping[int, str],
        rng: random.Random | None = None,
        exclude: Collection[int] = (),
        protect: bool = True,
        among: np.ndarray | None = None,
    ) -> int | None: ...

    def choice_scores(
        self,
        options: Sequence[Mapping[int, str]],
        scored: Sequence[Collection[int]],
        exclude: Collection[int] = (),
    ) -> list[float]: ...


class _Knowledge:
    """What the learner knows of one table: its conditional model and the file's raw fields."""

    def __init__(self, table: _Table, model: ConditionalModel) -> None:
        self.table = table
        self.model = model
        self.width = len(table.names)

    @cached_property
    def counters(self) -> dict[int, int]:
        """Columns that count rows, and the first count in the file."""
        columns = self.table.raw_columns
        return {
            j: int(columns[j][0].strip())
            for j in range(min(self.width, len(columns)))
            if is_counter(columns[j])
        }

    @cached_property
    def raw_texts(self) -> list[np.ndarray]:
        """Each column's raw field texts, as arrays for prefix tests."""
        return [np.asarray(column, dtype=object) for column in self.table.raw_columns]

    def given(self, pairs: Sequence[_Pair], skip: str | None = None) -> dict[int, str]:
        """The prompt's ``Name = value`` pairs as column index -> value."""
        return {self.table.column(p.name): p.value for p in pairs if p.value and p.name != skip}

    def starting_with(self, column: int, typed: str) -> np.ndarray | None:
        """Rows whose raw field in ``column`` begins with ``typed`` (None: any row will do)."""
        if not typed:
            return None
        texts = self.raw_texts[column]
        return np.array([str(t).startswith(typed) for t in texts], dtype=bool)


class LearnerOracle(FittedOracle):
    """Knows each dataset's joint distribution, never the rows it is asked about."""

    model_name = "oracle-learner"

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        super().__init__(datasets)
        self._known: dict[int, _Knowledge] = {}
        self._lock = threading.Lock()

    def _knowledge(self, table: _Table) -> _Knowledge:
        with self._lock:
            if id(table) not in self._known:
                self._known[id(table)] = _Knowledge(table, self._model(table))
            return self._known[id(table)]

    def _model(self, table: _Table) -> ConditionalModel:
        """The conditional model the learner answers with: nearest neighbours of the file."""
        return NeighbourModel(table.clean_rows)

    def _value(self, found: _Found, rng: random.Random, temperature: float) -> str:
        """The model's pick for the asked column given the pairs (a draw when warm)."""
        assert found.question is not None
        draw = rng if temperature > 0 else None
        known = self._knowledge(found.table)
        target = found.table.column(found.question.name)
        row = known.model.pick(target, known.given(found.pairs, found.question.name), draw)
        return "" if row is None else found.table.clean_rows[row][target]

    def _record(
        self, table: _Table, found: _Found | None, rng: random.Random, temperature: float
    ) -> str:
        known = self._knowledge(table)
        fixed = known.given(found.pairs) if found else {}
        values = self._row(known, fixed, rng, rng, (), None)
        clean = [_clean(v) for v in values]
        return table.observation(clean, found.style if found else _DEFAULT_STYLE)

    def _option_scores(self, table: _Table | None, context: str, options: list[str]) -> list[float]:
        """Each option's log-likelihood given the record (``NeighbourModel.choice_scores``):
        the option's values scored given every other value shown; the rows that agree with all
        the values the options share are the asked record, and are left out."""
        if table is None:
            return [0.0] * len(options)
        known = self._knowledge(table)
        base = known.given(table.pairs(context))
        own = [known.given(table.pairs(option)) for option in options]
        return known.model.choice_scores([{**base, **mine} for mine in own], own)

    def _continue(
        self,
        table: _Table,
        prompt: str,
        head: str,
        shown: str,
        partial: str,
        rng: random.Random,
        budget: int,
        draw: random.Random | None,
    ) -> str:
        """The prompt's CSV text continued: ``head``, the rest of the row ``partial`` began,
        then new rows until ``budget`` characters or a ``settled`` draft; the first row
        written is greedy when ``draw`` is None."""
        known = self._knowledge(table)
        asked = self._rows_after_cut(table, prompt, budget)
        counts = next_counts(known.counters, table.delimiter, shown)
        parts, size = [head], len(head)
        fields = raw_fields(partial, table.delimiter) if partial else []
        if fields:
            done = {j: _clean(f) for j, f in enumerate(fields[:-1]) if j < known.width}
            typed = (len(fields) - 1, fields[-1])
            row = self._row(known, done, rng, draw, asked, typed, counts)
            rest = row[typed[0]][len(typed[1]) :] if typed[0] < known.width else ""
            tail = "".join(table.delimiter + f for f in row[typed[0] + 1 :])
            parts.append(rest + tail + table.newline)
            size += len(parts[-1])
            counts = {j: c + 1 for j, c in counts.items()}
            draw = draw or rng
        while size < budget and not settled(parts):
            row = self._row(known, {}, rng, draw, asked, None, counts)
            parts.append(table.delimiter.join(row) + table.newline)
            size += len(parts[-1])
            counts = {j: c + 1 for j, c in counts.items()}
            draw = draw or rng
        return "".join(parts)

    def _row(
        self,
        known: _Knowledge,
        fixed: Mapping[int, str],
        rng: random.Random,
        draw: random.Random | None,
        asked: Collection[int],
        typed: tuple[int, str] | None,
        counts: Mapping[int, int] | None = None,
    ) -> list[str]:
        """One row's raw fields, column by column, each chosen from the neighbours given the
        values before it (``fixed`` values kept as given, counter columns counted on, the
        ``typed`` beginning of one field respected); greedy without ``draw``."""
        counts = counts or {}
        given: dict[int, str] = {}
        out: list[str] = []
        for j in range(known.width):
            if j in fixed and (typed is None or j != typed[0]):
                given[j] = fixed[j]
                out.append(fixed[j])
                continue
            if j in counts:
                out.append(str(counts[j]))
                given[j] = out[-1]
                continue
            prefix = typed[1] if typed and j == typed[0] else ""
            among = known.starting_with(j, prefix)
            row = known.model.pick(j, given, draw, exclude=asked, among=among)
            if row is None:
                out.append(self._unpicked(known, j, among, prefix))
            else:
                out.append(str(known.raw_texts[j][row]))
            given[j] = _clean(out[-1])
        return out

    @staticmethod
    def _unpicked(known: _Knowledge, column: int, among: np.ndarray | None, prefix: str) -> str:
        """The field written when the model picks no row: the first row's spelling that
        begins with the typed ``prefix`` (``among``), else empty."""
        if among is not None and among.any():
            return str(known.raw_texts[column][int(np.flatnonzero(among)[0])])
        return ""
