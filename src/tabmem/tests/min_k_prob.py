"""Min-K% Prob test: does the model find the file's real rows more familiar than near copies?

For a seeded sample of data rows, each row is paired with a perturbed copy (numbers moved by
one unit of their last digit, nothing else changed). The model scores both after the same
context (the header and the rows before it in the file) and each text gets its Min-K% score,
the mean log-probability of its k% least likely tokens. A model that has seen the file ranks
the real rows above their copies: the AUC of real against perturbed scores is above 0.5. A
model that has not cannot tell which of the two is real, so swapping the labels within pairs
gives the null distribution of the AUC (a permutation p-value).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from tabmem.data import Dataset
from tabmem.llm.logprobs import ScoreRequest, ScoreResponse, has_logprobs, no_logprobs_reason
from tabmem.results import QueryRecord, TestResult, Verdict
from tabmem.stats.min_k import min_k_score
from tabmem.stats.permutation import paired_auc_test
from tabmem.stats.verdicts import decide
from tabmem.tests.base import TestContext, register

_NUMBER = re.compile(r"^(\s*)([-+]?)(\d*)(\.?)(\d*)(\s*)$")


def nudge_number(text: str, rng: random.Random) -> str | None:
    """``text`` moved by one unit of its last digit, in the same format; None for non-numbers.

    The direction is random unless only one keeps the format: ``0`` can only go up, ``9``
    only down (``10`` has another digit), ``10`` only up (``09`` gains a leading zero).
    """
    match = _NUMBER.match(text)
    if match is None or not (match[3] + match[5]):
        return None
    lead, sign, whole, point, fraction, trail = match.groups()
    width = len(whole + fraction)
    units = int(whole + fraction)
    options = [
        digits
        for digits in (str(u).zfill(width) for u in (units - 1, units + 1) if 0 <= u < 10**width)
        if len(whole) < 2 or digits[0] != "0"
    ]
    if not options:
        return None
    new = rng.choice(options)
    return f"{lead}{sign}{new[: len(whole)]}{point}{new[len(whole) :]}{trail}"


def raw_fields(row: str, delimiter: str) -> list[str]:
    """The row's fields exactly as written (quotes kept), split at delimiters outside quotes."""
    fields, start, quoted = [], 0, False
    for i, char in enumerate(row):
        if char == '"':
            quoted = not quoted
        elif char == delimiter and not quoted:
            fields.append(row[start:i])
            start = i + 1
    return [*fields, row[start:]]


def perturb_row(row: str, delimiter: str, fraction: float, rng: random.Random) -> str | None:
    """The row with a share ``fraction`` (at least one) of its unquoted numeric fields nudged;
    None for a row without one. Every other character stays as it was."""
    fields = raw_fields(row, delimiter)
    numeric = [i for i, f in enumerate(fields) if nudge_number(f, rng) is not None]
    if not numeric:
        return None
    chosen = rng.sample(numeric, max(1, round(fraction * len(numeric))))
    for i in chosen:
        fields[i] = nudge_number(fields[i], rng) or fields[i]
    return delimiter.join(fields)


@dataclass(frozen=True)
class RowPair:
    """A data row (1-based ``row``), its perturbed copy, and the context both are read after."""

    row: int
    context: str
    real: str
    perturbed: str


def row_pairs(
    dataset: Dataset, n_rows: int, context_rows: int, fraction: float, rng: random.Random
) -> list[RowPair]:
    """A seeded sample of rows, each with a copy that is no real row of the file."""
    rows = dataset.rows
    existing = set(rows)
    order = list(range(len(rows)))
    rng.shuffle(order)
    pairs: list[RowPair] = []
    for index in order:
        if len(pairs) >= n_rows:
            break
        copy = perturb_row(rows[index], dataset.delimiter, fraction, rng)
        if copy is None or copy in existing:
            continue
        before = [dataset.header, *rows[max(0, index - context_rows) : index]]
        context = dataset.newline.join(before) + dataset.newline
        pairs.append(RowPair(index + 1, context, rows[index], copy))
    return sorted(pairs, key=lambda p: p.row)


def _record(pair: RowPair, real: ScoreResponse, fake: ScoreResponse, k: float) -> QueryRecord:
    error = real.error or fake.error
    if not error and (not real.logprobs or not fake.logprobs):
        error = "no token was scored"
    extra = {"row": pair.row, "perturbed": pair.perturbed}
    if error:
        return QueryRecord(pair.context, pair.real, "", 0.0, error=error, extra=extra)
    score_real, score_fake = min_k_score(real.logprobs, k), min_k_score(fake.logprobs, k)
    extra.update(
        min_k_real=score_real,
        min_k_perturbed=score_fake,
        loglik_real=real.total,
        loglik_perturbed=fake.total,
        tokens_real=len(real.logprobs),
        tokens_perturbed=len(fake.logprobs),
    )
    win = 1.0 if score_real > score_fake else 0.5 if score_real == score_fake else 0.0
    return QueryRecord(pair.context, pair.real, "", win, extra=extra)


def _not_applicable(reason: str, **info: object) -> TestResult:
    return TestResult(
        test="min_k_prob",
        verdict=Verdict.NOT_APPLICABLE,
        reason=reason,
        n_queries=0,
        n_hits=0,
        info=dict(info),
    )


@register("min_k_prob")
def run_min_k_prob(ctx: TestContext) -> TestResult:
    """Score real rows and their perturbed copies; AUC with a paired permutation p-value."""
    p = ctx.params
    if not has_logprobs(ctx.model.backend):
        return _not_applicable(no_logprobs_reason(ctx.model))
    rng = random.Random(ctx.seed)
    k = float(p.get("k_percent", 20))
    pairs = row_pairs(
        ctx.dataset,
        int(p.get("n_rows", 50)),
        int(p.get("context_rows", 1)),
        float(p.get("fields_fraction", 0.5)),
        rng,
    )
    min_pairs = int(p.get("min_pairs", 10))
    if len(pairs) < min_pairs:
        return _not_applicable(
            f"only {len(pairs)} rows could be perturbed (they need an unquoted numeric field); "
            f"the test needs {min_pairs}"
        )
    requests = [
        ScoreRequest(t, pair.context) for pair in pairs for t in (pair.real, pair.perturbed)
    ]
    scores = ctx.model.logprobs(requests, description=f"Min-K% Prob on {ctx.dataset.name}")
    records = [_record(pair, scores[2 * i], scores[2 * i + 1], k) for i, pair in enumerate(pairs)]
    return _result(ctx, records, k)


def _result(ctx: TestContext, records: list[QueryRecord], k: float) -> TestResult:
    p = ctx.params
    scored = [r for r in records if r.error is None]
    n_perm = int(p.get("n_permutations", 2000))
    alpha, min_auc = float(p.get("alpha", 0.01)), float(p.get("min_auc", 0.6))
    base = {
        "evidence_rule": (
            f"AUC of real against perturbed rows >= {min_auc} and permutation p < {alpha}"
        ),
        "k_percent": k,
    }
    if len(scored) < int(p.get("min_pairs", 10)):
        return TestResult(
            test="min_k_prob",
            verdict=Verdict.NOT_APPLICABLE,
            reason=f"only {len(scored)} row pairs were scored; the others failed",
            n_queries=len(records),
            n_hits=0,
            info=base,
            records=records,
        )
    real = [r.extra["min_k_real"] for r in scored]
    fake = [r.extra["min_k_perturbed"] for r in scored]
    test = paired_auc_test(real, fake, n_perm, ctx.seed)
    mean_lp = paired_auc_test(
        [r.extra["loglik_real"] / r.extra["tokens_real"] for r in scored],
        [r.extra["loglik_perturbed"] / r.extra["tokens_perturbed"] for r in scored],
        n_perm,
        ctx.seed,
    )
    decision = decide("Min-K% AUC - 0.5", test.p_value, test.statistic - 0.5, alpha, min_auc - 0.5)
    wins = sum(1 for r in scored if r.score == 1.0)
    return TestResult(
        test="min_k_prob",
        verdict=decision.verdict,
        reason=f"AUC {test.statistic:.3f} over {len(scored)} row pairs; {decision.reason}",
        n_queries=len(records),
        n_hits=wins,
        rate=wins / len(scored),
        baseline=0.5,
        p_value=test.p_value,
        metrics={
            "auc": test.statistic,
            "auc_null_mean": test.null_mean,
            "auc_null_sd": test.null_sd,
            "auc_mean_logprob": mean_lp.statistic,
            "p_value_mean_logprob": mean_lp.p_value,
            "pairs_scored": len(scored),
            "mean_min_k_real": sum(real) / len(real),
            "mean_min_k_perturbed": sum(fake) / len(fake),
            "n_permutations": n_perm,
        },
        info={**base, "prompt_form": "log-probabilities (no generation)"},
        records=records,
    )
