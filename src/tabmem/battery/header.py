"""The header test: can the model continue the first rows of the CSV file verbatim?

The prompt holds the header and the first rows of the file, cut inside one row;
the model is asked for what follows. Splits at several rows give several chances
and the best one counts. Few-shot examples (chat form only) come from other
datasets, so the model learns the task without seeing any part of the tested file beyond
the prompt. The examples are cut inside row ``few_shot_row`` for every split, so a cell's
queries share their prompt up to the tested file and a local model evaluates that part once
(``few_shot_row: null`` cuts them at each query's own split row).

Generation stops at the end of the line on which the answer first differs from the file
(``stop_on_divergence``, ``tabmem.llm.stopping``): nothing after it can change the score.

Two named rules decide: ``paper`` (Bordt et al.: one whole row after the cut row is
evidence) and ``strict`` (the default: two rows, one row is ambiguous). Both verdicts and
the splits that reach one and two rows are reported whichever rule is chosen.

The p-value (what the dataset verdict combines) has a stated null: a model without the rows
writes a given whole row after the cut at most at the rate the best data-only guess writes
whole rows of this file (row completion's baseline, ``file_row_baseline``: the mode row, the
previous row, marginal draws; at least 1 / rows). A split's hit (the rule's whole rows after
the cut) needs its last row, which no earlier split asks for, so under the null the split rows
that hit are at most Binomial(split rows asked, rate) and the p-value is its upper tail. Answers
at the same split row (recorded answers can repeat one) ask about the same rows and count as
one split row: a hit there if any of them hits. The null assumes the file's first rows are like
its other rows; a file sorted into blocks (iris, by class) lets a model that knows the order
guess a block's frequent rows more often than the file's rate.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import (
    Answer,
    Recorded,
    Rescorable,
    Worded,
    register_lifecycle,
    wording_figures,
)
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.data.csvtext import split_records
from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.stopping import StopRule
from tabmem.prompts.fewshot import chat_messages, few_shot_datasets, fit_to_context
from tabmem.results import QueryRecord, TestResult, Verdict
from tabmem.stats.baselines import ExactRowBaseline, file_row_baseline
from tabmem.stats.hits import HitCount
from tabmem.stats.scoring import strip_code_fence, verbatim_match


@dataclass(frozen=True)
class HeaderSettings(TestSettings):
    """``conf/test/header.yaml``."""

    split_rows: list[int]
    n_rows: int
    rule: str
    alpha: float
    few_shot: int
    few_shot_row: int | None
    stop_on_divergence: bool
    few_shot_pool: list[str]
    system_prompt: str


@dataclass(frozen=True)
class HeaderSplit:
    """The file's beginning cut inside data row ``row``: what the prompt shows, what follows."""

    row: int
    prefix: str
    continuation: str


def split_at_row(dataset: Dataset, row: int, n_rows: int, rng: random.Random) -> HeaderSplit | None:
    """Cut data row ``row`` (1-based) at a seeded position; the continuation ends after ``n_rows``.

    Returns None when the file has fewer rows than the split needs.
    """
    records = dataset.records
    if row >= len(records) or row < 1:
        return None
    region = dataset.prefix_text(min(n_rows, len(records) - 1) + 1)
    before = dataset.prefix_text(row)
    cut_row = records[row]
    if len(cut_row) < 2:
        return HeaderSplit(row, before, region[len(before) :])
    cut = rng.randint(1, len(cut_row) - 1)
    prefix = before + cut_row[:cut]
    return HeaderSplit(row, prefix, region[len(prefix) :])


RULES = {"strict": 2, "paper": 1}
"""Whole rows after the cut row that make ``evidence``, per named rule."""


def evidence_rows(rule: str) -> int:
    """The rows a named rule needs for ``evidence``; an unknown name is a configuration error."""
    if rule not in RULES:
        raise ConfigError(f"header test rule={rule!r} is unknown; use one of {sorted(RULES)}.")
    return RULES[rule]


def _verdict(best_rows: int, needed: int) -> tuple[Verdict, str]:
    if best_rows >= needed:
        return Verdict.EVIDENCE, (
            f"the model continued the file verbatim for {best_rows} whole rows after the cut "
            f"(rule: >= {needed} rows is evidence)"
        )
    if best_rows >= 1:
        return Verdict.AMBIGUOUS, (
            f"the model reproduced {best_rows} whole row after the cut, fewer than the "
            f"{needed} needed for evidence"
        )
    return Verdict.NO_EVIDENCE, "the model reproduced no whole row after the cut"


def split_row_hits(records: Sequence[QueryRecord], needed: int) -> dict[int, bool]:
    """Per split row asked, whether an answer there wrote ``needed`` whole rows after the cut.
    Answers at one split row ask about the same rows, so they are one chance, not several."""
    hits: dict[int, bool] = {}
    for r in records:
        row = int(r.extra["split_row"])
        hits[row] = hits.get(row, False) or int(r.extra["verbatim_rows"]) >= needed
    return hits


def whole_row_count(records: Sequence[QueryRecord], needed: int, rate: float) -> HitCount:
    """The split rows that hit against the whole-row rate of a model without the rows: its
    ``p_value`` is the upper tail of Binomial(split rows, rate)."""
    hits = split_row_hits(records, needed)
    return HitCount(sum(hits.values()), len(hits), rate)


def rows_after_cut(rows: int) -> int:
    """Whole rows reproduced beyond the cut one: finishing the cut row needs only knowledge
    of legal values (the rest of a category name), so it is not counted."""
    return max(0, rows - 1)


@dataclass(frozen=True)
class HeaderQuery:
    """One split of the file, the few-shot splits shown before it (chat form), and the
    datasets the examples were drawn from."""

    split: HeaderSplit
    shots: tuple[HeaderSplit, ...] = ()
    example_datasets: tuple[str, ...] = ()


@dataclass(frozen=True)
class HeaderFacts:
    """The rule's name and the rows it needs; the split rows the file is too short for; the
    file's whole-row baseline (the null's rate)."""

    rule: str
    needed: int
    short_rows: tuple[int, ...]
    baseline: ExactRowBaseline


@register_lifecycle
class Header(Rescorable[HeaderQuery, HeaderFacts]):
    """Ask for the continuation at each split; score rows and characters; best split decides."""

    name = "header"
    table_order = 1
    claims = "rows_seen"
    title = "header"
    settings = HeaderSettings

    def pick(self, ctx: TestContext) -> list[HeaderQuery]:
        """The splits, each with its examples: one seeded draw picks the example datasets,
        cuts the shared examples, then cuts each split (and, per split, its own examples)."""
        p = ctx.params
        rng = random.Random(ctx.seed)
        n_rows = p.n_rows
        examples = (
            few_shot_datasets(ctx.dataset, p.few_shot_pool, p.few_shot, rng)
            if ctx.prompt_form == "chat"
            else []
        )
        names = tuple(d.name for d in examples)

        def cut_examples(row: int) -> tuple[HeaderSplit, ...]:
            return tuple(s for s in (split_at_row(d, row, n_rows, rng) for d in examples) if s)

        shot_row = p.few_shot_row
        shared = cut_examples(int(shot_row)) if shot_row is not None else None
        queries = []
        for row in p.split_rows:
            split = split_at_row(ctx.dataset, int(row), n_rows, rng)
            if split is not None:
                shots = shared if shared is not None else cut_examples(int(row))
                queries.append(HeaderQuery(split, shots, names))
        return queries

    def prepare(self, ctx: TestContext, queries: Sequence[HeaderQuery]) -> HeaderFacts | TestResult:
        """The rule and the split rows too short for the file; ``not_applicable`` when no
        split leaves the whole rows after the cut that the rule needs for ``evidence``."""
        rule = ctx.params.rule
        needed = evidence_rows(rule)
        n_records = len(ctx.dataset.records)
        rows = ctx.params.split_rows
        short = tuple(r for r in rows if not 0 < r < n_records)
        scored_rows = min(ctx.params.n_rows, n_records - 1)
        if queries and all(scored_rows - q.split.row < needed for q in queries):
            asked = ", ".join(str(q.split.row) for q in queries)
            return TestResult.not_applicable(
                self.name,
                f"the file has {n_records - 1} data rows, so no split (rows {asked}) leaves the "
                f"{needed} whole rows after the cut that the {rule} rule needs for evidence",
                info={"skipped_split_rows": list(short), "rule": rule},
            )
        return HeaderFacts(rule, needed, short, file_row_baseline(ctx.dataset, ctx.seed))

    def word(
        self, ctx: TestContext, queries: Sequence[HeaderQuery], facts: HeaderFacts
    ) -> Worded[HeaderQuery]:
        p = ctx.params
        model = ctx.model_for("Wording")
        chat = model.prompt_form == "chat"
        stop_early = p.stop_on_divergence
        worded: Worded[HeaderQuery] = Worded([], [])
        dropped = 0
        unfit: list[int] = []
        for query in queries:
            split = query.split
            params = GenerationParams(
                max_tokens=model.count_tokens(split.continuation) + 16,
                temperature=0.0,
                seed=ctx.seed,
                stop_rule=StopRule.verbatim(split.continuation) if stop_early else None,
            )

            def build(kept: int, query: HeaderQuery = query, params=params) -> Request:
                if chat:
                    messages = chat_messages(
                        p.system_prompt,
                        [(s.prefix, s.continuation) for s in query.shots[:kept]],
                        query.split.prefix,
                    )
                    return Request(params=params, messages=messages)
                return Request(params=params, prompt=query.split.prefix)

            fitted = fit_to_context(
                build, len(query.shots), model.count_tokens, model.context_window, params
            )
            if fitted.request is None:
                unfit.append(split.row)
                continue
            dropped += fitted.dropped_examples
            worded.requests.append(fitted.request)
            worded.queries.append(query)
        names = list(queries[0].example_datasets) if queries else []
        worded.context = {
            "few_shot_datasets": names,
            "unfit_split_rows": unfit,
            "few_shot_examples": len(names),
            "few_shot_examples_dropped": dropped,
        }
        return worded

    def unfit(
        self, ctx: TestContext, facts: HeaderFacts, worded: Worded[HeaderQuery]
    ) -> TestResult:
        skipped = _skipped_rows(ctx, facts, worded.context)
        return TestResult.not_applicable(
            self.name,
            f"no split fits the file and the context window (rows {skipped})",
            info={"skipped_split_rows": skipped},
        )

    def locate(self, ctx: TestContext, recorded: Recorded) -> HeaderQuery | str:
        """The split a recorded prefix shows: the file's first characters, cut inside a row."""
        dataset, prefix = ctx.dataset, recorded.prefix
        if not prefix or not dataset.text.startswith(prefix):
            return "the prefix is not the beginning of the file"
        n_rows = ctx.params.n_rows
        region = dataset.prefix_text(min(n_rows, len(dataset.records) - 1) + 1)
        if len(prefix) >= len(region):
            return f"the prefix runs past the first {n_rows} rows the test scores"
        shown = split_records(prefix)
        row = len(shown) if prefix.endswith(("\n", "\r")) else len(shown) - 1
        return HeaderQuery(HeaderSplit(row, prefix, region[len(prefix) :]))

    def score(
        self, ctx: TestContext, facts: HeaderFacts, answer: Answer[HeaderQuery]
    ) -> QueryRecord:
        split, response = answer.query.split, answer.response
        match = verbatim_match(
            split.continuation, strip_code_fence(response.text), ctx.dataset.newline
        )
        after_cut = rows_after_cut(match.rows)
        return QueryRecord(
            prompt=answer.prompt,
            expected=split.continuation,
            completion=response.text,
            score=float(after_cut),
            error=response.error,
            extra={
                "split_row": split.row,
                "prefix": split.prefix,
                "verbatim_chars": match.chars,
                "verbatim_rows": after_cut,
                "cut_row_completed": match.rows >= 1,
                "expected_rows": match.expected_rows,
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: HeaderFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        """The best split's whole rows after the cut against the rule, both rules reported; the
        p-value of the split rows that hit against the file's whole-row baseline."""
        rule, needed, baseline = facts.rule, facts.needed, facts.baseline
        best_rows = max(int(r.extra["verbatim_rows"]) for r in records)
        best_chars = max(int(r.extra["verbatim_chars"]) for r in records)
        verdict, reason = _verdict(best_rows, needed)
        count = whole_row_count(records, needed, baseline.rate)
        reason += (
            f"; p={count.p_value:.3g}: {count.hits} of {count.n} split rows reached {needed} "
            f"whole rows, against a whole-row baseline of {baseline.rate:.3g} (the best "
            "data-only guess of a row of this file)"
        )
        alpha = ctx.params.alpha
        if verdict == Verdict.EVIDENCE and count.p_value >= alpha:
            # The rule's rows are what a model without the rows could write on this file
            # often enough (a small file of repeated rows): the cell says what its p allows.
            verdict = Verdict.AMBIGUOUS
            reason += f", not below alpha={alpha:g}, so the rule's rows are not evidence here"
        reaching = {k: sum(r.extra["verbatim_rows"] >= k for r in records) for k in (1, 2)}
        verdicts = {name: _verdict(best_rows, rows)[0].value for name, rows in RULES.items()}
        hits = sum(1 for r in records if r.extra["verbatim_rows"] >= needed)
        skipped = _skipped_rows(ctx, facts, context)
        dropped = context.get("few_shot_examples_dropped", 0)
        return TestResult(
            test=self.name,
            verdict=verdict,
            reason=reason,
            n_queries=len(records),
            n_hits=hits,
            rate=hits / len(records),
            baseline=baseline.rate,
            p_value=count.p_value,
            metrics={
                "split_rows_asked": count.n,
                "split_rows_hit": count.hits,
                "baseline_mode_row": baseline.mode_row,
                "baseline_repeat_previous": baseline.repeat_previous,
                "baseline_marginal_product": baseline.marginal_product,
                "best_verbatim_rows": best_rows,
                "best_verbatim_chars": best_chars,
                "splits_reaching_1_row": reaching[1],
                "splits_reaching_2_rows": reaching[2],
                **{f"evidence_{name}": float(v == "evidence") for name, v in verdicts.items()},
                **wording_figures({k: v for k, v in context.items() if k.startswith("few_shot")}),
                "splits_skipped": len(skipped),
            },
            info={
                "evidence_rule": (
                    f"{rule} rule: best split reproduces >= {needed} whole rows after the cut "
                    "row verbatim"
                ),
                "rule": rule,
                "null": (
                    "a model without the rows writes a given whole row after the cut at most at "
                    "the file's whole-row baseline rate (mode row, previous row, marginal "
                    "draws); split rows that hit <= Binomial(split rows asked, rate)"
                ),
                **{f"verdict_{name}": v for name, v in verdicts.items()},
                "few_shot_datasets": context.get("few_shot_datasets", []),
                "prompt_form": ctx.prompt_form,
                "prompt_shortened": dropped > 0 or bool(skipped),
                "skipped_split_rows": skipped,
            },
            records=list(records),
        )


def _skipped_rows(ctx: TestContext, facts: HeaderFacts, context: dict[str, Any]) -> list[int]:
    """The split rows not asked, in config order: the file is too short, or the prompt does
    not fit the context window."""
    left_out = {*facts.short_rows, *context.get("unfit_split_rows", [])}
    return [r for r in ctx.params.split_rows if r in left_out]
