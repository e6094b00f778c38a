"""The forest scorer: a reference model that gives log-probabilities, the adversary of the
log-probability tests of rows seen (Min-K% Prob, the twin pair tests, the learned likelihood
test).

``ScorerOracle`` writes text as the forest learner does (``tabmem.llm.oracle.forest``) and also
scores text (``logprobs``, the ``LogprobBackend`` contract; ``logprob_moments_batch``, the
``MomentsBackend`` one). It knows each file's joint distribution through the forest learner's
cross-fitted forests and never the row it scores:

- **What it reads.** ``context`` names the file (its header) and the place of ``text`` in it:
  the data rows after the header are found in the file, and the row after them is the place
  (none where the context is the header alone). ``text`` is one CSV line of that file (the
  real row, its twin's row, a contrast row).
- **Tokens.** One per field: separators and the newline are folded into the fields (a
  language model writes them with probability about 1 in a file's format). A line whose field
  count is not the file's is not scored (None).
- **The rule.** A field's log-probability is log P(value | the line's other values), a
  pseudo-log-likelihood, by the forest of that column on all the others (``ForestModel``).
  The row at the place and the file's rows equal to the line weigh nothing, and the fold that
  answers is the one holding out the row at the place (without a place, the line's own fold
  where it is a row of the file, else a hash of its values: ``CrossFitted.fold``). So a real
  row and the twin row read in its place are scored by the very same fitted forests and
  weights, and none of them ever held the real row.
- **Values.** A category's probability is the forest learner's (the leaves' weight of the
  value, mixed with 1 % of its add-one frequency). A measurement's is the probability of its
  written precision: the forest-weighted kernel density (the forest learner's) times the
  width of the column's last digit (iris: 0.1, so ``5`` and ``5.1`` alike), at most 1.
- **Moments.** The mean and standard deviation of log P(z) for z drawn from the same
  conditional distribution: exactly, over the column's values, for a category; for a
  measurement, over quantiles of the training values the leaves weigh (``Kernel``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence

from tabmem.data.csvtext import raw_fields
from tabmem.data.dataset import Dataset
from tabmem.llm.oracle.forest import ForestModel, ForestOracle
from tabmem.llm.oracle.models import _clean, _Table
from tabmem.stats.formats import column_width
from tabmem.stats.likelihood import Triple

KEPT_SCORES = 200_000
"""Lines whose scores a scorer keeps (each test of a job reads the same rows again)."""


class ScorerOracle(ForestOracle):
    """The forest learner that also scores text: each field of a CSV line by its cross-fitted
    conditional given the line's other values, never fitted on the row scored."""

    model_name = "oracle-scorer"
    version = "1"

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        super().__init__(datasets)
        self._scores: OrderedDict[tuple[str, int | None, str], tuple[Triple, ...]] = OrderedDict()
        self._widths: dict[str, list[float]] = {}
        self._scores_lock = threading.Lock()

    def logprobs(self, text: str, context: str = "") -> list[float] | None:
        """One log-probability per field of ``text`` read after ``context``; None where the
        context names no known file or the line is not one of its rows' shape."""
        triples = self.scored(text, context)
        return None if triples is None else [t[0] for t in triples]

    def logprob_moments_batch(self, items: list[tuple[str, str]]) -> list[list[Triple]]:
        """Per (context, text) pair, one (log-probability, mean, sd) per field ([] where the
        text cannot be scored)."""
        return [list(self.scored(text, context) or ()) for context, text in items]

    def scored(self, text: str, context: str = "") -> tuple[Triple, ...] | None:
        """Each field's triple, computed once per file, place and line."""
        table = self._identify(context) if context else None
        if table is None:
            return None
        fields = [_clean(f) for f in raw_fields(text, table.delimiter)]
        if len(fields) != len(table.names):
            return None
        place = self.place(table, context)
        key = (table.dataset.name, place, text)
        with self._scores_lock:
            if key in self._scores:
                self._scores.move_to_end(key)
                return self._scores[key]
        model = self._knowledge(table).model
        assert isinstance(model, ForestModel)
        exclude = () if place is None else (place,)
        triples = line_scores(model, fields, exclude, self.widths(table))
        with self._scores_lock:
            self._scores[key] = triples
            while len(self._scores) > KEPT_SCORES:
                self._scores.popitem(last=False)
        return triples

    def widths(self, table: _Table) -> list[float]:
        """Each column's last digit's width (``column_width``), read once per file."""
        with self._scores_lock:
            if table.dataset.name not in self._widths:
                self._widths[table.dataset.name] = [
                    column_width(column) for column in table.clean_columns
                ]
            return self._widths[table.dataset.name]

    @staticmethod
    def place(table: _Table, context: str) -> int | None:
        """The data row (0-based) that follows the context's rows in the file, or None where
        the context shows no row of it after its header."""
        head = table.header + table.newline
        at = context.rfind(head)
        body = context[at + len(head) :] if at >= 0 else ""
        if not body:
            return None
        found = table.text.find(table.newline + body)
        if found < 0:
            return None
        return table.lines_before(found + len(table.newline) + len(body)) - 1


def line_scores(
    model: ForestModel,
    fields: Sequence[str],
    exclude: Collection[int],
    widths: Sequence[float],
) -> tuple[Triple, ...]:
    """Every field's triple given the line's other values (``widths``: each column's last
    digit's); the ``exclude`` rows and the rows equal to the line weigh nothing, and the fold
    holding out the first of them answers."""
    values = dict(enumerate(fields))
    usable = model.usable(values)
    asked = model.asked(usable, exclude)
    fold = model.fold(usable, asked)
    given = {j: {i: v for i, v in usable.items() if i != j} for j in values}
    return tuple(
        model.triple(j, fields[j], given[j], asked, fold, widths[j]) for j in range(len(fields))
    )
