"""Feature names: given the dataset's name and the first quarter of its header, can the model
write the rest of the header?

The prompt shows the header's first quarter of names exactly as in the file (with the delimiter
after the last one), on a line of its own, so a model that knows the file goes on with the next
name. The score is the number of the remaining names the answer reproduces exactly (case and
spelling as in the header) and in the right order: the longest common subsequence of the
answer's names and the true ones.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import Answer, Lifecycle, Worded, register_lifecycle, wording_figures
from tabmem.battery.settings import TestSettings
from tabmem.data import Dataset
from tabmem.llm.base import Request
from tabmem.prompts.fewshot import chat_messages, fit_to_context
from tabmem.prompts.observations import dataset_title, example_pool
from tabmem.results import QueryRecord, TestResult, Verdict
from tabmem.stats.scoring import strip_code_fence


@dataclass(frozen=True)
class FeatureNamesSettings(TestSettings):
    """``conf/test/feature_names.yaml``."""

    evidence_share: float
    few_shot: int
    few_shot_pool: list[str]
    system_prompt: str
    names_prompt: str


_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def shown_count(dataset: Dataset) -> int:
    """How many names the prompt shows: a quarter of them, at least one."""
    return max(1, len(dataset.feature_names) // 4)


def header_prefix(dataset: Dataset, count: int) -> str:
    """The header's text up to and including the delimiter after its ``count``-th field."""
    header, delimiter = dataset.header, dataset.delimiter
    seen, quoted = 0, False
    for i, ch in enumerate(header):
        if ch == '"':
            quoted = not quoted
        elif ch == delimiter and not quoted:
            seen += 1
            if seen == count:
                return header[: i + 1]
    return header + delimiter


def _names_in(line: str, delimiter: str) -> list[str]:
    parts = line.split(delimiter) if delimiter in line else line.split(",")
    return [p.strip().strip("\"'`") for p in parts]


def answer_names(completion: str, dataset: Dataset, shown: list[str]) -> list[str]:
    """The feature names an answer lists, without the shown ones it repeats.

    A one-line answer is split at the file's delimiter (or at commas); an answer written as a
    list (one name per line, maybe with bullets or numbers) is read line by line.
    """
    lines = [line for line in strip_code_fence(completion).split("\n") if line.strip()]
    lines = [line for line in lines if not line.strip().startswith("```")]
    if not lines:
        return []
    first = lines[0]
    if dataset.delimiter in first or "," in first:
        names = _names_in(first, dataset.delimiter)
    else:
        names = [_LIST_MARK.sub("", line).strip().strip("\"'`") for line in lines]
    names = [n for n in names if n]
    while names and shown and names[: len(shown)] == shown:
        names = names[len(shown) :]
    return names


def names_in_order(answer: list[str], truth: list[str]) -> int:
    """How many true names the answer reproduces exactly and in order (longest common
    subsequence)."""
    previous = [0] * (len(truth) + 1)
    for name in answer:
        current = [0]
        for j, true_name in enumerate(truth):
            current.append(
                previous[j] + 1 if name == true_name else max(previous[j + 1], current[j])
            )
        previous = current
    return previous[-1]


def leading_run(answer: list[str], truth: list[str]) -> int:
    """How many true names the answer gets right from the start, without a gap."""
    run = 0
    for name, true_name in zip(answer, truth, strict=False):
        if name != true_name:
            break
        run += 1
    return run


def _question(template: str, dataset: Dataset) -> tuple[str, str]:
    """The prompt text for ``dataset`` and the true rest of its header."""
    prefix = header_prefix(dataset, shown_count(dataset))
    text = template.format(dataset=dataset_title(dataset), prefix=prefix)
    return text, dataset.header[len(prefix) :]


def _verdict(score: int, remaining: int, share: float) -> tuple[Verdict, str, int]:
    needed = max(1, math.ceil(share * remaining))
    figures = f"the answer lists {score} of the {remaining} remaining feature names in order"
    if score >= needed:
        return Verdict.EVIDENCE, f"{figures} (rule: >= {needed} is evidence)", needed
    if score >= 1:
        return Verdict.AMBIGUOUS, f"{figures}, fewer than the {needed} needed", needed
    return Verdict.NO_EVIDENCE, figures, needed


@dataclass(frozen=True)
class NamesFacts:
    """The names the prompt shows, the names left to give, and the text that holds them."""

    shown: list[str]
    truth: list[str]
    truth_text: str


@register_lifecycle
class FeatureNames(Lifecycle[str, NamesFacts]):
    """Ask for the rest of the header; count the true names reproduced in order."""

    name = "feature_names"
    table_order = 11
    claims = "knowledge"
    title = "feature names"
    settings = FeatureNamesSettings
    nothing_fits = "the prompt does not fit the model's context window"

    def plan(self, ctx: TestContext) -> tuple[list[str], NamesFacts] | TestResult:
        names = [n.strip() for n in ctx.dataset.feature_names]
        if len(names) < 2:
            return TestResult.not_applicable(
                self.name, "the dataset has fewer than two features, so none is left to name"
            )
        question, truth_text = _question(ctx.params.names_prompt, ctx.dataset)
        shown = names[: shown_count(ctx.dataset)]
        return [question], NamesFacts(shown, names[len(shown) :], truth_text)

    def word(self, ctx: TestContext, queries: Sequence[str], facts: NamesFacts) -> Worded[str]:
        p = ctx.params
        model = ctx.model_for("Wording")
        chat = model.prompt_form == "chat"
        rng = random.Random(ctx.seed)
        pool = example_pool(ctx.dataset, p.few_shot_pool)
        pool = rng.sample(pool, min(p.few_shot, len(pool)))
        examples = [_question(p.names_prompt, d) for d in pool]
        params = ctx.greedy_answer(model.count_tokens(ctx.dataset.header) + 16)
        worded: Worded[str] = Worded([], [], {"few_shot_datasets": [d.name for d in pool]})
        for question in queries:

            def build(kept: int, question: str = question) -> Request:
                if chat:
                    system = p.system_prompt
                    return Request(
                        params=params, messages=chat_messages(system, examples[:kept], question)
                    )
                shots = "".join(f"{q}{a}\n\n" for q, a in examples[:kept])
                return Request(params=params, prompt=shots + question)

            fitted = fit_to_context(
                build, len(examples), model.count_tokens, model.context_window, params
            )
            if fitted.request is not None:
                worded.queries.append(question)
                worded.requests.append(fitted.request)
                worded.context["few_shot_examples"] = len(examples)
                worded.context["few_shot_examples_dropped"] = fitted.dropped_examples
        return worded

    def score(self, ctx: TestContext, facts: NamesFacts, answer: Answer[str]) -> QueryRecord:
        response = answer.response
        given = [] if response.error else answer_names(response.text, ctx.dataset, facts.shown)
        return QueryRecord(
            prompt=answer.prompt,
            expected=facts.truth_text,
            completion=response.text,
            score=float(names_in_order(given, facts.truth)),
            error=response.error,
            extra={
                "names_given": given,
                "names_expected": facts.truth,
                "leading_run": leading_run(given, facts.truth),
            },
        )

    def decide(
        self,
        ctx: TestContext,
        facts: NamesFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        p = ctx.params
        [record] = records
        given, truth = record.extra["names_given"], facts.truth
        score = int(record.score)
        verdict, reason, needed = _verdict(score, len(truth), p.evidence_share)
        return TestResult(
            test=self.name,
            verdict=verdict,
            reason=reason,
            n_queries=1,
            n_hits=int(score >= needed),
            rate=score / len(truth),
            metrics={
                "names_shown": len(facts.shown),
                "names_remaining": len(truth),
                "names_in_order": score,
                "names_leading_run": record.extra["leading_run"],
                "names_given": len(given),
                "names_needed": needed,
                **wording_figures(context),
            },
            info={
                "evidence_rule": (
                    f"the answer lists at least {p.evidence_share} of the remaining "
                    "names (at least one), exactly and in order"
                ),
                "few_shot_datasets": context.get("few_shot_datasets", []),
                "prompt_form": ctx.prompt_form,
            },
            records=list(records),
        )
