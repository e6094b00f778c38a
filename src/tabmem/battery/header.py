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
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tabmem.battery.base import TestContext, register
from tabmem.data import Dataset
from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.stopping import StopRule
from tabmem.prompts.fewshot import chat_messages, few_shot_datasets, fit_to_context
from tabmem.results import QueryRecord, TestResult, Verdict
from tabmem.stats.scoring import strip_code_fence, verbatim_match


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


def rows_after_cut(rows: int) -> int:
    """Whole rows reproduced beyond the cut one: finishing the cut row needs only knowledge
    of legal values (the rest of a category name), so it is not counted."""
    return max(0, rows - 1)


@register("header")
def run_header_test(ctx: TestContext) -> TestResult:
    """Ask for the continuation at each split; score rows and characters; best split decides."""
    p = ctx.params
    rng = random.Random(ctx.seed)
    n_rows = int(p.get("n_rows", 12))
    rule = str(p.get("rule", "strict"))
    needed = evidence_rows(rule)
    chat = ctx.model.prompt_form == "chat"
    examples = (
        few_shot_datasets(ctx.dataset, p.get("few_shot_pool", []), int(p.get("few_shot", 3)), rng)
        if chat
        else []
    )

    def cut_examples(row: int) -> list[HeaderSplit]:
        return [s for s in (split_at_row(d, row, n_rows, rng) for d in examples) if s]

    shot_row = p.get("few_shot_row")
    shared_shots = cut_examples(int(shot_row)) if shot_row is not None else None
    stop_early = bool(p.get("stop_on_divergence", True))

    requests: list[Request] = []
    splits: list[HeaderSplit] = []
    dropped = 0
    skipped_rows: list[int] = []
    for row in p.get("split_rows", [2, 4, 6, 8]):
        split = split_at_row(ctx.dataset, int(row), n_rows, rng)
        if split is None:
            skipped_rows.append(int(row))
            continue
        shots = shared_shots if shared_shots is not None else cut_examples(int(row))
        params = GenerationParams(
            max_tokens=ctx.model.count_tokens(split.continuation) + 16,
            temperature=0.0,
            seed=ctx.seed,
            stop_rule=StopRule.verbatim(split.continuation) if stop_early else None,
        )

        def build(
            kept: int, split: HeaderSplit = split, shots: list = shots, params=params
        ) -> Request:
            if chat:
                messages = chat_messages(
                    str(p.get("system_prompt", "")),
                    [(s.prefix, s.continuation) for s in shots[:kept]],
                    split.prefix,
                )
                return Request(params=params, messages=messages)
            return Request(params=params, prompt=split.prefix)

        fitted = fit_to_context(
            build, len(shots), ctx.model.count_tokens, ctx.model.context_window, params
        )
        if fitted.request is None:
            skipped_rows.append(int(row))
            continue
        dropped += fitted.dropped_examples
        requests.append(fitted.request)
        splits.append(split)

    responses = ctx.model.run(requests, description=f"header test on {ctx.dataset.name}")
    records: list[QueryRecord] = []
    best_rows, best_chars = 0, 0
    for request, split, response in zip(requests, splits, responses, strict=True):
        completion = strip_code_fence(response.text)
        match = verbatim_match(split.continuation, completion, ctx.dataset.newline)
        after_cut = rows_after_cut(match.rows)
        best_rows = max(best_rows, after_cut)
        best_chars = max(best_chars, match.chars)
        records.append(
            QueryRecord(
                prompt=request.as_text(),
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
        )

    if not records:
        return TestResult.not_applicable(
            "header",
            f"no split fits the file and the context window (rows {skipped_rows})",
            info={"skipped_split_rows": skipped_rows},
        )
    verdict, reason = _verdict(best_rows, needed)
    reaching = {k: sum(r.extra["verbatim_rows"] >= k for r in records) for k in (1, 2)}
    verdicts = {name: _verdict(best_rows, rows)[0].value for name, rows in RULES.items()}
    hits = sum(1 for r in records if r.extra["verbatim_rows"] >= needed)
    return TestResult(
        test="header",
        verdict=verdict,
        reason=reason,
        n_queries=len(records),
        n_hits=hits,
        rate=hits / len(records),
        metrics={
            "best_verbatim_rows": best_rows,
            "best_verbatim_chars": best_chars,
            "splits_reaching_1_row": reaching[1],
            "splits_reaching_2_rows": reaching[2],
            **{f"evidence_{name}": float(v == "evidence") for name, v in verdicts.items()},
            "few_shot_examples": len(examples),
            "few_shot_examples_dropped": dropped,
            "splits_skipped": len(skipped_rows),
        },
        info={
            "evidence_rule": (
                f"{rule} rule: best split reproduces >= {needed} whole rows after the cut row "
                "verbatim"
            ),
            "rule": rule,
            **{f"verdict_{name}": v for name, v in verdicts.items()},
            "few_shot_datasets": [d.name for d in examples],
            "prompt_form": ctx.model.prompt_form,
            "prompt_shortened": dropped > 0 or bool(skipped_rows),
            "skipped_split_rows": skipped_rows,
        },
        records=records,
    )
