"""Dataset name: shown the first rows of the CSV file, does the model name the dataset?

Each query shows the header and the first rows of a file and asks for the dataset's name. The
answer names the dataset whose configured name or alias (``conf/dataset/*.yaml``) it contains,
the longest match winning (so "Spaceship Titanic" names that dataset, not Titanic). Control
queries show other datasets' first rows the same way: answering those with the tested
dataset's name too would mean the model says it regardless of the data.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, Lifecycle, Worded, register_lifecycle
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset, DatasetSpec, dataset_specs
from tabmem.llm.base import Request
from tabmem.prompts.fewshot import chat_messages, fit_to_context
from tabmem.prompts.observations import dataset_title, example_pool
from tabmem.results import QueryRecord, TestResult, Verdict


@dataclass(frozen=True)
class DatasetNameSettings(TestSettings):
    """``conf/test/dataset_name.yaml``."""

    row_counts: list[int]
    controls: int
    evidence_share: float
    max_tokens: int
    few_shot: int
    few_shot_pool: list[str]
    system_prompt: str
    name_prompt: str


def normalize_name(text: str) -> str:
    """Lower case, with every run of non-alphanumeric characters as one space."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def known_names(spec: DatasetSpec) -> list[str]:
    """A dataset's config name and aliases, normalized."""
    names = [normalize_name(n) for n in (spec.name, *spec.aliases)]
    return [n for n in names if n.strip()]


def named_dataset(answer: str, specs: Mapping[str, DatasetSpec]) -> str | None:
    """The dataset whose longest known name the answer contains, or None."""
    text = normalize_name(answer)
    best, best_length = None, 0
    for name, spec in specs.items():
        for known in known_names(spec):
            if known in text and len(known) > best_length:
                best, best_length = name, len(known)
    return best


@dataclass(frozen=True)
class Shown:
    """One query: whose first rows it shows, and how many."""

    dataset: Dataset
    rows: int
    control: bool


def _question(template: str, dataset: Dataset, rows: int) -> str:
    """The prompt text showing the header and the first ``rows`` rows of ``dataset``."""
    return template.format(
        rows=dataset.prefix_text(min(rows, len(dataset.rows)) + 1).rstrip("\r\n")
    )


def _plan(ctx: TestContext, p: DatasetNameSettings) -> tuple[list[Shown], list[Dataset]]:
    """The tested and control queries, and the few-shot datasets (neither tested nor control)."""
    rng = random.Random(ctx.seed)
    pool = example_pool(ctx.dataset, p.few_shot_pool)
    rng.shuffle(pool)
    k = p.few_shot
    shots, controls = pool[:k], pool[k : k + p.controls]
    counts = p.row_counts
    shown = [Shown(ctx.dataset, n, False) for n in counts]
    shown += [Shown(d, n, True) for d in controls for n in counts]
    return shown, shots


def _request(
    ctx: TestContext, p: DatasetNameSettings, shown: Shown, shots: list[Dataset]
) -> Request | None:
    """One query; its few-shot examples show as many rows as it does. None if it cannot fit."""
    template = p.name_prompt
    examples = [(_question(template, d, shown.rows), dataset_title(d)) for d in shots]
    question = _question(template, shown.dataset, shown.rows)
    model = ctx.model_for("Wording")
    chat = model.prompt_form == "chat"
    params = ctx.greedy_answer(p.max_tokens)

    def build(kept: int) -> Request:
        if chat:
            return Request(
                params=params,
                messages=chat_messages(p.system_prompt, examples[:kept], question),
            )
        return Request(
            params=params, prompt="".join(f"{q} {a}\n\n" for q, a in examples[:kept]) + question
        )

    return fit_to_context(
        build, len(examples), model.count_tokens, model.context_window, params
    ).request


def _verdict(hits: int, tested: int, false_names: int, share: float) -> tuple[Verdict, str]:
    needed = max(1, math.ceil(share * tested))
    figures = f"the model named the dataset in {hits}/{tested} queries"
    if hits >= needed and false_names == 0:
        return Verdict.EVIDENCE, f"{figures} and never gave its name to the control datasets"
    if hits >= 1:
        return Verdict.AMBIGUOUS, (
            f"{figures} but also gave its name to {false_names} control queries"
            if false_names
            else f"{figures}, fewer than the {needed} needed"
        )
    return Verdict.NO_EVIDENCE, figures


@dataclass(frozen=True)
class NameFacts:
    """The few-shot datasets, and every dataset an answer may name."""

    shots: list[Dataset]
    specs: dict[str, DatasetSpec]


@register_lifecycle
class DatasetName(Lifecycle[Shown, NameFacts]):
    """Ask for the name of the tested and the control datasets; score against known names."""

    name = "dataset_name"
    table_order = 12
    claims = "knowledge"
    title = "dataset name"
    settings = DatasetNameSettings

    def plan(self, ctx: TestContext) -> tuple[list[Shown], NameFacts]:
        specs = dict(dataset_specs())
        specs[ctx.dataset.name] = ctx.dataset.spec
        shown, shots = _plan(ctx, ctx.params)
        return shown, NameFacts(shots, specs)

    def word(self, ctx: TestContext, queries: Sequence[Shown], facts: NameFacts) -> Worded[Shown]:
        built = [(s, _request(ctx, ctx.params, s, facts.shots)) for s in queries]
        kept = [(s, r) for s, r in built if r is not None]
        return Worded([s for s, _ in kept], [r for _, r in kept])

    def score(self, ctx: TestContext, facts: NameFacts, answer: Answer[Shown]) -> QueryRecord:
        shown, response = answer.query, answer.response
        named = None if response.error else named_dataset(response.text, facts.specs)
        return QueryRecord(
            prompt=answer.prompt,
            expected=dataset_title(shown.dataset),
            completion=response.text,
            score=float(named == ctx.dataset.name),
            error=response.error,
            extra={
                "shown_dataset": shown.dataset.name,
                "rows_shown": shown.rows,
                "control": shown.control,
                "named": named or "",
                "named_correctly": named == shown.dataset.name,
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: NameFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        p = ctx.params
        tested = [r for r in records if not r.extra["control"]]
        controls = [r for r in records if r.extra["control"]]
        hits = sum(int(r.score) for r in tested)
        false_names = sum(int(r.score) for r in controls)
        share = p.evidence_share
        verdict, reason = _verdict(hits, len(tested), false_names, share)
        return TestResult(
            test=self.name,
            verdict=verdict,
            reason=reason,
            n_queries=len(records),
            n_hits=hits,
            rate=hits / len(tested) if tested else 0.0,
            baseline=false_names / len(controls) if controls else None,
            metrics={
                "tested_queries": len(tested),
                "control_queries": len(controls),
                "control_named_as_tested": false_names,
                "controls_named_correctly": sum(r.extra["named_correctly"] for r in controls),
            },
            info={
                "evidence_rule": (
                    f"the answer names the dataset in at least {share} of the tested queries, "
                    "and no control query is answered with its name"
                ),
                "names_accepted": [ctx.dataset.name, *ctx.dataset.spec.aliases],
                "control_datasets": sorted({r.extra["shown_dataset"] for r in controls}),
                "few_shot_datasets": [d.name for d in facts.shots],
                "prompt_form": ctx.prompt_form,
            },
            records=list(records),
        )
