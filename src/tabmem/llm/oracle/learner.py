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
from collections.abc import Collection, Mapping, Sequence
from functools import cached_property
from typing import Protocol

import numpy as np

from tabmem.data.copula import is_counter
from tabmem.llm.oracle.models import (
    _DEFAULT_STYLE,
    FittedOracle,
    _clean,
    _Found,
    _RowRequest,
    _Table,
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

    def starting_with(self, column: int, typed: str) -> np.ndarray | None:
        """Rows whose raw field in ``column`` begins with ``typed`` (None: any row will do)."""
        if not typed:
            return None
        texts = self.raw_texts[column]
        return np.array([str(t).startswith(typed) for t in texts], dtype=bool)


class LearnerOracle(FittedOracle[_Knowledge]):
    """Knows each dataset's joint distribution, never the rows it is asked about."""

    model_name = "oracle-learner"

    def _fit(self, table: _Table) -> _Knowledge:
        return _Knowledge(table, self._model(table))

    def _model(self, table: _Table) -> ConditionalModel:
        """The conditional model the learner answers with: nearest neighbours of the file."""
        return NeighbourModel(table.clean_rows)

    def _value(self, found: _Found, rng: random.Random, temperature: float) -> str:
        """The model's pick for the asked column given the pairs (a draw when warm)."""
        assert found.question is not None
        draw = rng if temperature > 0 else None
        known = self._knowledge(found.table)
        target = found.table.column(found.question.name)
        given = found.table.by_column(found.pairs, found.question.name)
        row = known.model.pick(target, given, draw)
        return "" if row is None else found.table.clean_rows[row][target]

    def _record(
        self, table: _Table, found: _Found | None, rng: random.Random, temperature: float
    ) -> str:
        known = self._knowledge(table)
        fixed = table.by_column(found.pairs) if found else {}
        values = self._row(known, _RowRequest(fixed, (), rng))
        clean = [_clean(v) for v in values]
        return table.observation(clean, found.style if found else _DEFAULT_STYLE)

    def _option_scores(self, table: _Table | None, context: str, options: list[str]) -> list[float]:
        """Each option's log-likelihood given the record (``NeighbourModel.choice_scores``):
        the option's values scored given every other value shown; the rows that agree with all
        the values the options share are the asked record, and are left out."""
        if table is None:
            return [0.0] * len(options)
        known = self._knowledge(table)
        base = table.by_column(table.pairs(context))
        own = [table.by_column(table.pairs(option)) for option in options]
        return known.model.choice_scores([{**base, **mine} for mine in own], own)

    def _row(self, known: _Knowledge, request: _RowRequest) -> list[str]:
        """The row's raw fields, each field the model does not keep chosen from the
        neighbours given the values before it; a typed beginning is respected."""
        given: dict[int, str] = {}
        out: list[str] = []
        for j in range(known.width):
            kept = request.kept(j)
            if kept is not None:
                given[j] = kept
                out.append(kept)
                continue
            prefix = request.prefix(j)
            among = known.starting_with(j, prefix)
            row = known.model.pick(j, given, request.draw, exclude=request.asked, among=among)
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
