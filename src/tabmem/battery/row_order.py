"""Row-order test: does the model prefer the file's own order of its first rows to shuffles?

The model scores the header followed by the file's first ``n_rows`` data rows, once in the
file's order and once in each of ``n_permutations`` seeded shuffles of the same rows. If the
rows are exchangeable (nothing in the data says which order is the file's), a model that has
not seen the file gives the real order a log-likelihood that is just one draw among the
shuffles'; its rank among them is an exact permutation p-value (after Oren et al., "Proving
test set contamination in black box language models", ICLR 2024).

Whether the rows are exchangeable is checked on the data alone first, and the test runs
only where the file's order is shown to carry no signal a model could use: the whole file
(where a sorted or grouped order shows with many rows) must not be in a detectable order, and
the first rows must be no smoother than a typical shuffle, column by column and all columns
together. Failing to reject order on 24 rows is not enough (iris's first rows, all of one
class, pass a 5 % test). Otherwise the test is not applicable, with the reason.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, ScoringTest, Worded, register_lifecycle
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.csvtext import parse_fields
from tabmem.llm.logprobs import ScoreRequest
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.independence import row_order_check
from tabmem.stats.order_structure import block_order, row_features
from tabmem.stats.permutation import rank_against_null
from tabmem.stats.verdicts import decide


@dataclass(frozen=True)
class RowOrderSettings(TestSettings):
    """``conf/test/row_order.yaml``."""

    n_rows: int
    n_permutations: int
    min_rows: int
    file_alpha: float
    file_shuffles: int
    exchangeable_min_p: float
    structure_shuffles: int
    alpha: float
    min_z: float


def shuffled_orders(n: int, count: int, rng: random.Random) -> list[list[int]]:
    """``count`` seeded orders of ``range(n)``, none equal to the identity (when n > 1)."""
    orders: list[list[int]] = []
    identity = list(range(n))
    while len(orders) < count:
        order = identity[:]
        rng.shuffle(order)
        if order != identity or n < 2:
            orders.append(order)
    return orders


def block_text(dataset: Dataset, rows: list[str], order: list[int]) -> str:
    """The rows in the given order, each ending with the file's newline."""
    return "".join(rows[i] + dataset.newline for i in order)


def order_signal(ctx: TestContext, rows: list[str]) -> tuple[str | None, dict[str, float]]:
    """Why the file's order could be preferred without memory (None when it shows no order),
    and the data-only figures behind that decision.

    Three checks, all on the data alone. The whole file (``row_order_check`` over up to its
    first 10,000 rows) has the power that 24 rows lack: a file sorted or grouped by a value
    shows there. The first rows must then be no smoother than a typical shuffle: the smoothest
    column's Bonferroni p-value, and the p-value of all columns together, above
    ``exchangeable_min_p`` (0.5), not merely above a test level.
    """
    p = ctx.params
    min_p = p.exchangeable_min_p
    whole = row_order_check(
        ctx.dataset.frame,
        permutations=p.file_shuffles,
        seed=ctx.seed,
        alpha=p.file_alpha,
    )
    delimiter = ctx.dataset.delimiter
    features = row_features([parse_fields(r, delimiter) for r in rows])
    block = block_order(features, p.structure_shuffles, ctx.seed)
    metrics = {
        "file_order_p_value": whole.p_value,
        "structure_p_value": block.bonferroni_p,
        "structure_overall_p_value": block.overall_p,
    }
    n = len(rows)
    if whole.shows_order:
        columns = ", ".join(whole.ordered_columns) or "no single column"
        return (
            f"the file is not in random order: over the whole file neighbouring rows are more "
            f"alike than in shuffles (p={whole.p_value:.3g}; ordered columns: {columns}), so "
            f"its first {n} rows carry an order a model could prefer without memory"
        ), metrics
    if block.bonferroni_p <= min_p:
        j = int(block.column_p.argmin())
        name = parse_fields(ctx.dataset.header, delimiter)[features.columns[j]]
        return (
            f"the order of the first {n} rows shows in the data alone: column '{name}' is "
            f"smoother than in shuffles (p={block.column_p[j]:.3g}, Bonferroni "
            f"{block.bonferroni_p:.3g} <= {min_p:g}), so a model could prefer it without memory"
        ), metrics
    if block.overall_p <= min_p:
        return (
            f"the first {n} rows are smoother than a typical shuffle over all columns together "
            f"(p={block.overall_p:.3g} <= {min_p:g}), so a model could prefer their order "
            "without memory"
        ), metrics
    return None, metrics


def z_score(value: float, mean: float, sd: float) -> float:
    """Standard deviations above the shuffles' mean; infinite when the shuffles all tie."""
    if sd > 0:
        return (value - mean) / sd
    return 0.0 if value == mean else float("inf") if value > mean else float("-inf")


@dataclass(frozen=True)
class Ordering:
    """The file's first rows in one order: the file's (``None``) or a seeded shuffle."""

    order: list[int] | None
    text: str


@register_lifecycle
class RowOrderTest(ScoringTest[Ordering, dict[str, float]]):
    """Log-likelihood of the file's row order against shuffles, after an exchangeability check."""

    name = "row_order"
    table_order = 10
    claims = "rows_seen"
    title = "row order"
    settings = RowOrderSettings

    def plan(self, ctx: TestContext) -> tuple[list[Ordering], dict[str, float]] | TestResult:
        p = ctx.params
        rng = random.Random(ctx.seed)
        rows = ctx.dataset.rows[: p.n_rows]
        if len(rows) < p.min_rows:
            return TestResult.not_applicable(self.name, f"the file has only {len(rows)} data rows")
        reason, structure = order_signal(ctx, rows)
        if reason is not None:
            return TestResult.not_applicable(self.name, reason, metrics=structure)
        orders = shuffled_orders(len(rows), p.n_permutations, rng)
        queries = [Ordering(None, block_text(ctx.dataset, rows, list(range(len(rows)))))]
        queries += [Ordering(o, block_text(ctx.dataset, rows, o)) for o in orders]
        return queries, structure

    def word(
        self, ctx: TestContext, queries: Sequence[Ordering], facts: dict[str, float]
    ) -> Worded[Ordering]:
        context = ctx.dataset.header + ctx.dataset.newline
        return Worded(list(queries), [(ScoreRequest(q.text, context),) for q in queries])

    def score(
        self, ctx: TestContext, facts: dict[str, float], answer: Answer[Ordering]
    ) -> QueryRecord:
        (scored,) = answer.response
        return QueryRecord(
            prompt=ctx.dataset.header + ctx.dataset.newline,
            expected=answer.query.text,
            completion="",
            score=scored.total if scored.error is None else 0.0,
            error=scored.error or (None if scored.logprobs else "no token was scored"),
            extra={
                "order": "file" if answer.query.order is None else "shuffled",
                "tokens": len(scored.logprobs),
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: dict[str, float],
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        return _result(ctx, list(records), facts)


def _result(
    ctx: TestContext, records: list[QueryRecord], structure: dict[str, float]
) -> TestResult:
    p = ctx.params
    alpha, min_z = p.alpha, p.min_z
    rule = f"file order beats the shuffles with p < {alpha} and z >= {min_z}"
    if records[0].error is not None:
        return TestResult.not_applicable(
            "row_order",
            f"the file's order could not be scored: {records[0].error}",
            info={"evidence_rule": rule},
            records=records,
        )
    null = [r.score for r in records[1:] if r.error is None]
    test = rank_against_null(records[0].score, null)
    z = z_score(test.statistic, test.null_mean, test.null_sd)
    decision = decide("file-order log-likelihood z", test.p_value, z, alpha, min_z)
    beaten = sum(1 for v in null if records[0].score > v)
    return TestResult(
        test="row_order",
        verdict=decision.verdict,
        reason=(
            f"the file's order beats {beaten} of {len(null)} shuffles "
            f"(log-likelihood {test.statistic:.1f} vs mean {test.null_mean:.1f}); {decision.reason}"
        ),
        n_queries=len(records),
        n_hits=beaten,
        rate=beaten / len(null) if null else None,
        baseline=0.5,
        p_value=test.p_value,
        metrics={
            "loglik_file_order": test.statistic,
            "loglik_shuffled_mean": test.null_mean,
            "loglik_shuffled_sd": test.null_sd,
            "z": z,
            **structure,
            "rows": len(ctx.dataset.rows[: p.n_rows]),
            "n_permutations": len(null),
        },
        info={"evidence_rule": rule, "prompt_form": "log-probabilities (no generation)"},
        records=records,
    )
