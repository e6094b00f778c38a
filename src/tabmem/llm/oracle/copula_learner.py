"""The copula learner: a second hard negative, of another model family than the learner.

``CopulaOracle`` knows each dataset's distribution, format and names, and none of its rows,
through Gaussian copulas of the file (``tabmem.data.copula_conditional``: one copula per
stratum of the hub column). It shares no code path with the nearest-neighbour model
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
from collections.abc import Sequence

from tabmem.data.copula_conditional import CopulaConditionals, Prefixes
from tabmem.data.values import normalize_value
from tabmem.llm.oracle.models import (
    _DEFAULT_STYLE,
    FittedOracle,
    _clean,
    _Found,
    _Pair,
    _RowRequest,
    _Table,
)


class CopulaOracle(FittedOracle[CopulaConditionals]):
    """Knows each dataset's Gaussian-copula distribution, never the rows it is asked about."""

    model_name = "oracle-copula"
    version = "1"

    def _fit(self, table: _Table) -> CopulaConditionals:
        return CopulaConditionals(table.raw_rows)

    def _value(self, found: _Found, rng: random.Random, temperature: float) -> str:
        assert found.question is not None
        draw = rng if temperature > 0 else None
        return self._feature(found.table, found.pairs, found.question, draw)

    def _record(
        self, table: _Table, found: _Found | None, rng: random.Random, temperature: float
    ) -> str:
        known = self._knowledge(table)
        fixed = table.by_column(found.pairs) if found else {}
        row = self._row(known, _RowRequest(fixed, (), rng))
        clean = [_clean(v) for v in row]
        return table.observation(clean, found.style if found else _DEFAULT_STYLE)

    def _feature(
        self, table: _Table, pairs: Sequence[_Pair], question: _Pair, draw: random.Random | None
    ) -> str:
        """The asked column's value given the shown ones, without the rows they may describe."""
        known = self._knowledge(table)
        target = table.column(question.name)
        given = table.by_column(pairs, question.name)
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
        base = table.by_column(table.pairs(context))
        own = [table.by_column(table.pairs(option)) for option in options]
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

    def _row(self, known: CopulaConditionals, request: _RowRequest) -> list[str]:
        """The row's raw fields, each field the model does not keep chosen given the values
        before it, without the asked rows and those the fixed values may describe (a typed
        field stays as typed when no row left in spells a value so)."""
        left_out = set(request.asked) | known.asked(request.fixed)
        draw = request.draw
        evidence = known.evidence({}, left_out)
        out: list[str] = []
        for j in range(known.width):
            kept = request.kept(j)
            if kept is not None:
                out.append(kept)
            else:
                prefix = request.prefix(j)
                probabilities = known.probabilities(j, evidence, left_out)
                if prefix:
                    probabilities = probabilities * known.spelled_from(j, prefix, left_out)
                code = known.choose(j, probabilities, draw)
                text = None if code is None else known.spell(j, code, left_out, draw, prefix)
                out.append(prefix if text is None else text)
            evidence.add(j, out[-1])
        return out
