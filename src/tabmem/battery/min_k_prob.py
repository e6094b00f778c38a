"""Min-K% Prob test: does the model find the file's real rows more familiar than contrast rows?

Every data row (up to the cap ``n_rows``, sampled above it) is paired with a contrast row: the
same row with a block of its columns taken from a similar row of the file
(``tabmem.stats.contrast``), so every value is written as the file writes that column and the
row stays as plausible as a real one; in a file whose rows are in order the donor comes from
the same stretch of the file, since the rows before a row (its context) tell a model without
memory which values are near, and never from the rows its context may hold. The model scores
both after the same context (the header and the rows before the real row, read in passes over
the file: ``battery.file_pass``) and each text gets its Min-K% score, the mean log-probability
of its k% least likely tokens. A model that has seen the file scores the real row above its
contrast in most pairs.

A model that has not seen it is no coin flip: real rows are more plausible than rows with a
block of values from another row, and a nearest-neighbour model that never saw the row
preferred the real row in 112 of 150 pairs on california-housing (p = 6e-10 against a coin
flip). Of the two ways out — contrasts no data-only model can tell from real rows, or a paired
comparison with what a data-only model prefers on the same pairs — this test takes the
paired comparison: contrasts drawn so that *no* data-only model can tell them would have to be
draws from the joint distribution given the rest of the row, which is the model we would have
to trust, and any structure it misses a model may find; the paired comparison instead states,
per pair, each data-only rule's chance of preferring the real row (``tabmem.stats.blind_check``,
shared with the twin tests: the values' frequencies, a nearest-neighbour model and the
Gaussian copula of the file, each without the real row, as the existence probe's rules), and
the baseline is the best rule's (or a coin flip's, where higher) rate of preferring the real
row on the very pairs the model won or lost. The pairs the model wins (untied) are compared
with it by the exact binomial tail. Unlike the count tests, the baseline is not the best rule
per pair: with two options, that is 1 wherever two rules disagree (0.87 on the unit tests'
places file, where each rule alone prefers the real row in 33 % to 53 % of the pairs), which
no single model reaches. Where the best rule alone would be ``evidence`` against a coin flip,
the reason says that the file's distribution alone explains such a win rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tabmem.battery.base import TestContext
from tabmem.battery.file_pass import (
    MAX_PLACES,
    RowRead,
    RowTexts,
    in_runs,
    read_figures,
    read_file,
    rows_sentence,
    scored_reads,
    token_counter,
)
from tabmem.battery.lifecycle import (
    Answer,
    ScoringTest,
    Worded,
    register_lifecycle,
    wording_figures,
)
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.llm.logprobs import ScoreResponse
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.auc import auc
from tabmem.stats.blind_check import BlindCheck, evidence_rule, pair_chances
from tabmem.stats.contrast import ContrastTable
from tabmem.stats.independence import RowOrder, row_order_check
from tabmem.stats.likelihood import Triple
from tabmem.stats.min_k import min_k_score
from tabmem.stats.permutation import paired_sign_test


@dataclass(frozen=True)
class MinKProbSettings(TestSettings):
    """``conf/test/min_k_prob.yaml``."""

    n_rows: int
    context_rows: int
    window_tokens: int
    fields_fraction: float
    donor_pool: int
    donor_window: int
    order_permutations: int
    k_percent: int
    min_pairs: int
    alpha: float
    min_win_rate: float


@dataclass(frozen=True)
class RowPair:
    """A data row (1-based ``row``), its contrast, and the donor row (1-based) the contrast
    took its ``replaced`` columns from; both are read after the same context."""

    row: int
    real: str
    contrast: str
    donor: int
    replaced: tuple[str, ...]


@dataclass(frozen=True)
class PairSample:
    """The pairs, and how many sampled rows were dropped because their donor brought the
    very values they have."""

    pairs: list[RowPair]
    dropped: int


def file_order(
    dataset: Dataset, table: ContrastTable, permutations: int, alpha: float, seed: int
) -> RowOrder:
    """The data-only check of row order (``tabmem.stats.independence``) on the columns a
    contrast may use: row counters never move, so their order says nothing here."""
    counters = [dataset.feature_names[j] for j in table.ordered]
    frame = dataset.frame.drop(columns=counters)
    return row_order_check(frame, permutations=permutations, seed=seed, alpha=alpha)


def _nearby(n: int, index: int, window: int, context_rows: int) -> np.ndarray:
    """Rows within ``window`` places of row ``index``, less the row and its context rows."""
    places = np.arange(n)
    near = np.abs(places - index) <= window
    return near & ~((places >= index - context_rows) & (places <= index))


def row_pairs(
    dataset: Dataset,
    table: ContrastTable,
    n_rows: int,
    context_rows: int,
    fraction: float,
    pool: int,
    rng: np.random.Generator,
    window: int | None = None,
) -> PairSample:
    """Up to ``n_rows`` rows, each with a contrast row (see ``tabmem.stats.contrast``): rows
    tried in a seeded order (as runs of consecutive rows where more than ``MAX_PLACES`` of a
    larger file are asked: ``battery.file_pass``); with a ``window``, each donor comes from the
    rows near it in the file, less the ``context_rows`` before it (rows its context may hold)."""
    rows = dataset.rows
    names = dataset.feature_names
    pairs: list[RowPair] = []
    dropped = 0
    if MAX_PLACES < n_rows < len(rows):
        order = in_runs(len(rows), n_rows, rng)
    else:
        order = rng.permutation(len(rows)).tolist()
    for index in order:
        if len(pairs) >= n_rows:
            break
        eligible = None if window is None else _nearby(len(rows), index, window, context_rows)
        contrast = table.contrast(index, fraction, pool, rng, eligible)
        if contrast is None:
            dropped += 1
            continue
        replaced = tuple(names[j] for j in contrast.columns)
        pairs.append(RowPair(index + 1, rows[index], contrast.text, contrast.donor + 1, replaced))
    return PairSample(sorted(pairs, key=lambda p: p.row), dropped)


def _record(
    pair: RowPair,
    real: ScoreResponse,
    other: ScoreResponse,
    k: float,
    chances: dict[str, float],
    where: RowRead,
    dataset: Dataset,
) -> QueryRecord:
    error = real.error or other.error
    if not error and (not real.logprobs or not other.logprobs):
        error = "no token was scored"
    extra = {
        "row": pair.row,
        "contrast": pair.contrast,
        "donor_row": pair.donor,
        "replaced": list(pair.replaced),
        "context_rows": where.read.context_rows(where.row),
        "baseline_chances": chances,
    }
    prompt = where.read.prompt(dataset, where.row)
    if error:
        return QueryRecord(prompt, pair.real, "", 0.0, error=error, extra=extra)
    score_real, score_other = min_k_score(real.logprobs, k), min_k_score(other.logprobs, k)
    extra.update(
        min_k_real=score_real,
        min_k_contrast=score_other,
        loglik_real=real.total,
        loglik_contrast=other.total,
        tokens_real=len(real.logprobs),
        tokens_contrast=len(other.logprobs),
    )
    win = 1.0 if score_real > score_other else 0.5 if score_real == score_other else 0.0
    return QueryRecord(prompt, pair.real, "", win, extra=extra)


@dataclass(frozen=True)
class PairFacts:
    """The share of least likely tokens scored, how many sampled rows got no contrast, the
    file's row order, which decides where the donors come from, and each pair's data-only
    rules' chances of preferring the real row (by 1-based row)."""

    k: float
    dropped: int
    order: RowOrder
    chances: dict[int, dict[str, float]]
    rows: str


@register_lifecycle
class MinKProb(ScoringTest[RowPair, PairFacts]):
    """Score real rows and their contrast rows; the share of pairs won, exact sign test."""

    name = "min_k_prob"
    table_order = 9
    claims = "rows_seen"
    title = "Min-K% Prob"
    settings = MinKProbSettings

    def plan(self, ctx: TestContext) -> tuple[list[RowPair], PairFacts] | TestResult:
        p = ctx.params
        table = ContrastTable(
            ctx.dataset.rows, ctx.dataset.delimiter, len(ctx.dataset.feature_names)
        )
        order = file_order(ctx.dataset, table, p.order_permutations, p.alpha, ctx.seed)
        sample = row_pairs(
            ctx.dataset,
            table,
            p.n_rows,
            p.donor_window if p.window_tokens > 0 else p.context_rows,
            p.fields_fraction,
            p.donor_pool,
            np.random.default_rng(ctx.seed),
            p.donor_window if order.shows_order else None,
        )
        min_pairs = p.min_pairs
        if len(sample.pairs) < min_pairs:
            return TestResult.not_applicable(
                self.name,
                f"only {len(sample.pairs)} rows got a contrast row (a row needs a column whose "
                f"values vary and a donor that brings other values); the test needs {min_pairs}",
                info={"pairs_dropped": sample.dropped},
            )
        k = p.k_percent

        def statistic(triples: Sequence[Triple], text: str) -> float:
            return min_k_score([t[0] for t in triples], k)

        chances = pair_chances(
            ctx.dataset, [(q.row, q.real, q.contrast) for q in sample.pairs], statistic
        )
        tried = len(sample.pairs) + sample.dropped
        rows = rows_sentence(tried, len(ctx.dataset.rows), p.n_rows)
        return sample.pairs, PairFacts(p.k_percent, sample.dropped, order, chances, rows)

    def word(
        self, ctx: TestContext, queries: Sequence[RowPair], facts: PairFacts
    ) -> Worded[RowPair]:
        """One read of the file for all pairs (each contrast in its real row's place, after
        the same prefix); each pair's request is its row in it."""
        p = ctx.params
        model = ctx.model_for("Wording")
        window = min(p.window_tokens, model.context_window) if p.window_tokens > 0 else 0
        items = [RowTexts(pair.row - 1, (pair.contrast,)) for pair in queries]
        read = read_file(
            ctx.dataset, items, token_counter(model), window, p.context_rows, not p.context_rows
        )
        rows = [item.row for item in items]
        figures = read_figures(read, rows, p.window_tokens)
        return Worded(list(queries), [RowRead(read, row) for row in rows], figures)

    def ask(self, ctx: TestContext, requests: Sequence[Any]) -> list[Any]:
        model = ctx.model_for("Asking")
        return scored_reads(model, requests, f"{self.title} on {ctx.dataset.name}")

    def score(self, ctx: TestContext, facts: PairFacts, answer: Answer[RowPair]) -> QueryRecord:
        real, contrast = answer.response
        chances = facts.chances[answer.query.row]
        return _record(answer.query, real, contrast, facts.k, chances, answer.request, ctx.dataset)

    def decide(
        self,
        ctx: TestContext,
        facts: PairFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        return _result(ctx, list(records), facts, wording_figures(context))


def _donors(order: RowOrder, window: int, passes: bool) -> str:
    if not order.shows_order:
        return "nearest on the other columns in the whole file (its rows show no order)"
    columns = ", ".join(order.ordered_columns) or "all columns together"
    where = (
        f"within the {window} rows after the real row (any row before it may be in its context)"
        if passes
        else f"within {window} rows of the real row, its context rows excepted"
    )
    return (
        f"nearest on the other columns {where}: the file is in order ({columns}; "
        f"p={order.p_value:.3g} over all columns), so the rows before a row tell a model "
        f"without memory which values are near"
    )


def _result(
    ctx: TestContext, records: list[QueryRecord], facts: PairFacts, figures: dict[str, float]
) -> TestResult:
    p = ctx.params
    k, dropped = facts.k, facts.dropped
    scored = [r for r in records if r.error is None]
    alpha, margin = p.alpha, p.min_win_rate - 0.5
    base = {
        "evidence_rule": evidence_rule("Min-K% score", alpha, margin),
        "k_percent": k,
        "donors": _donors(facts.order, p.donor_window, p.window_tokens > 0),
        "rows": facts.rows,
    }
    if len(scored) < p.min_pairs:
        return TestResult.not_applicable(
            "min_k_prob",
            f"only {len(scored)} row pairs were scored; the others failed",
            info=base,
            records=records,
        )
    real = [r.extra["min_k_real"] for r in scored]
    other = [r.extra["min_k_contrast"] for r in scored]
    test = paired_sign_test(real, other)
    untied = [r for r in scored if r.extra["min_k_real"] != r.extra["min_k_contrast"]]
    blind = BlindCheck.of([r.extra["baseline_chances"] for r in untied], test.wins, alpha, margin)
    mean_lp = paired_sign_test(
        [r.extra["loglik_real"] / r.extra["tokens_real"] for r in scored],
        [r.extra["loglik_contrast"] / r.extra["tokens_contrast"] for r in scored],
    )
    decision = blind.decision("Min-K% score")
    in_file = set(ctx.dataset.rows)
    return TestResult(
        test="min_k_prob",
        verdict=decision.verdict,
        reason=(
            f"the real row scored higher in {test.wins} of {test.wins + test.losses} untied "
            f"pairs ({test.ties} tied) of {len(scored)} ({facts.rows}); {decision.reason}"
        ),
        n_queries=len(records),
        n_hits=test.wins,
        rate=test.win_rate,
        baseline=blind.baseline,
        p_value=blind.p_value,
        metrics={
            **blind.metrics(),
            "sign_test_p_value": test.p_value,
            "win_rate": test.win_rate,
            "pairs_won": test.wins,
            "pairs_lost": test.losses,
            "pairs_tied": test.ties,
            "win_rate_mean_logprob": mean_lp.win_rate,
            "p_value_mean_logprob": mean_lp.p_value,
            "auc": auc(real, other),
            "pairs_scored": len(scored),
            "pairs_dropped": dropped,
            "rows_in_file": float(len(ctx.dataset.rows)),
            **figures,
            "file_order_p_value": facts.order.p_value,
            "donors_nearby": float(facts.order.shows_order),
            "contrasts_in_file": sum(r.extra["contrast"] in in_file for r in scored),
            "mean_min_k_real": sum(real) / len(real),
            "mean_min_k_contrast": sum(other) / len(other),
        },
        info={**base, **blind.info(), "prompt_form": "log-probabilities (no generation)"},
        records=records,
    )
