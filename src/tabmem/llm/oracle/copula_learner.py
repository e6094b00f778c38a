"""The copula learner: a second hard negative, of another model family than the learner.

``CopulaOracle`` knows each dataset's distribution, format and names, and none of its rows,
through the Gaussian copulas the twins are drawn from (``tabmem.data.copula_conditional``: one
copula per stratum of the hub column). It shares no code path with the nearest-neighbour model
(``tabmem.stats.neighbours``) that ``oracle-learner`` answers with and that builds the
data-only baselines, so a test whose false-positive rate is 0 on the learner by construction
meets here a negative that its baseline does not contain.

- A feature question gets, at temperature 0, the most likely value of the asked column given
  the shown values (the latent Gaussian conditioned on their scores, in the stratum of a shown
  hub value); above it, a draw from that conditional. It is written in the file's most frequent
  raw spelling of the value, cleaned of quotes and padding like every oracle's one-value answer.
- A multiple-choice question gets the option with the highest conditional log-likelihood of its
  values given the rest of the record (for whole records, the sum over their values of each
  value's log probability given the record's other values).
- CSV text is continued in the file's exact format: the row the prompt breaks off in is
  finished consistently with its typed beginning, the first row written is at temperature 0
  the most likely one (greedy, column by column given the earlier ones), later rows are draws,
  and a counter column goes on counting.
- An observation request gets a draw (given the values the prompt fixes); a name question the
  dataset's name.

It never answers from the rows it is asked about, as the learner: rows agreeing with every
shown value are left out when there are at most ``max(10, sqrt(n))`` of them, and so are the
rows after the point where a CSV prompt stops. Leaving rows out refits the counts and the
correlation of the strata that hold them (cheap: a downdate of the fit, cached per set of rows;
see ``tabmem.data.copula_conditional``), so a value only they hold is never written.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Collection, Mapping, Sequence

from tabmem.data.copula_conditional import CopulaConditionals, Prefixes
from tabmem.data.csvtext import raw_fields
from tabmem.data.dataset import Dataset
from tabmem.data.values import normalize_value
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


def _given(table: _Table, pairs: Sequence[_Pair], skip: str | None = None) -> dict[int, str]:
    """The prompt's ``Name = value`` pairs as column index -> value."""
    return {table.column(p.name): p.value for p in pairs if p.value and p.name != skip}


class CopulaOracle(FittedOracle):
    """Knows each dataset's Gaussian-copula distribution, never the rows it is asked about."""

    model_name = "oracle-copula"
    version = "1"

    def __init__(self, datasets: Sequence[Dataset]) -> None:
        super().__init__(datasets)
        self._known: dict[int, CopulaConditionals] = {}
        self._lock = threading.Lock()

    def _knowledge(self, table: _Table) -> CopulaConditionals:
        """The table's copula model, fitted on first use."""
        with self._lock:
            if id(table) not in self._known:
                self._known[id(table)] = CopulaConditionals(table.raw_rows)
            return self._known[id(table)]

    def _value(self, found: _Found, rng: random.Random, temperature: float) -> str:
        assert found.question is not None
        draw = rng if temperature > 0 else None
        return self._feature(found.table, found.pairs, found.question, draw)

    def _record(
        self, table: _Table, found: _Found | None, rng: random.Random, temperature: float
    ) -> str:
        known = self._knowledge(table)
        fixed = _given(table, found.pairs) if found else {}
        row = self._row(known, fixed, known.asked(fixed), rng, None, {})
        clean = [_clean(v) for v in row]
        return table.observation(clean, found.style if found else _DEFAULT_STYLE)

    def _feature(
        self, table: _Table, pairs: Sequence[_Pair], question: _Pair, draw: random.Random | None
    ) -> str:
        """The asked column's value given the shown ones, without the rows they may describe."""
        known = self._knowledge(table)
        target = table.column(question.name)
        given = _given(table, pairs, question.name)
        left_out = known.asked(given)
        probabilities = known.probabilities(target, known.evidence(given, left_out), left_out)
        code = known.choose(target, probabilities, draw)
        text = None if code is None else known.spell(target, code, left_out, draw)
        return "" if text is None else _clean(text)

    def _option_scores(self, table: _Table | None, context: str, options: list[str]) -> list[float]:
        """Each option's log-likelihood given the record: the sum, over the option's own
        values, of each value's log probability given the record's other values. The rows
        agreeing with every value all options share are the asked record, and are left out."""
        if table is None:
            return [0.0] * len(options)
        known = self._knowledge(table)
        base = _given(table, table.pairs(context))
        own = [_given(table, table.pairs(option)) for option in options]
        records = [{**base, **mine} for mine in own]
        shared = {
            j: v
            for j, v in records[0].items()
            if all(j in r and normalize_value(r[j]) == normalize_value(v) for r in records[1:])
        }
        left_out = known.asked(shared)
        prefixes: Prefixes = {}
        scores = []
        for record, mine in zip(records, own, strict=True):
            total = 0.0
            for term in known.log_probs_given_rest(record, list(mine), left_out, prefixes):
                total += term
            scores.append(total)
        return scores

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
        written is greedy when ``draw`` is None, the others are draws."""
        known = self._knowledge(table)
        asked = set(self._rows_after_cut(table, prompt, budget))
        counts = next_counts(known.counters, table.delimiter, shown)
        parts, size = [head], len(head)
        fields = raw_fields(partial, table.delimiter) if partial else []
        if fields:
            done = {j: _clean(f) for j, f in enumerate(fields[:-1]) if j < known.width}
            typed = (len(fields) - 1, fields[-1])
            left_out = asked | known.asked(done)
            row = self._row(known, done, left_out, draw, typed, counts)
            rest = row[typed[0]][len(typed[1]) :] if typed[0] < known.width else ""
            tail = "".join(table.delimiter + f for f in row[typed[0] + 1 :])
            parts.append(rest + tail + table.newline)
            size += len(parts[-1])
            counts = {j: c + 1 for j, c in counts.items()}
            draw = draw or rng
        while size < budget and not settled(parts):
            row = self._row(known, {}, asked, draw, None, counts)
            parts.append(table.delimiter.join(row) + table.newline)
            size += len(parts[-1])
            counts = {j: c + 1 for j, c in counts.items()}
            draw = draw or rng
        return "".join(parts)

    @staticmethod
    def _row(
        known: CopulaConditionals,
        fixed: Mapping[int, str],
        left_out: Collection[int],
        draw: random.Random | None,
        typed: tuple[int, str] | None,
        counts: Mapping[int, int],
    ) -> list[str]:
        """One row's raw fields, column by column, each given the values before it: ``fixed``
        values kept, counter columns counted on, the ``typed`` beginning of one field kept
        (the field stays as typed when no row left in spells a value so); greedy without
        ``draw``."""
        evidence = known.evidence({}, left_out)
        out: list[str] = []
        for j in range(known.width):
            if j in fixed and (typed is None or j != typed[0]):
                out.append(fixed[j])
            elif j in counts:
                out.append(str(counts[j]))
            else:
                prefix = typed[1] if typed and j == typed[0] else ""
                probabilities = known.probabilities(j, evidence, left_out)
                if prefix:
                    probabilities = probabilities * known.spelled_from(j, prefix, left_out)
                code = known.choose(j, probabilities, draw)
                text = None if code is None else known.spell(j, code, left_out, draw, prefix)
                out.append(prefix if text is None else text)
            evidence.add(j, out[-1])
        return out
