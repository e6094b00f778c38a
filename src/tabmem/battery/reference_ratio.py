"""Reference ratio test: is the file likelier to the model than to a reference model, more so
than its twin is?

For a seeded sample of rows, each real row and the twin's row at its place are scored after
the same context (``battery.twin_pairs``) by the model and by a reference model that has not
read the file (in the contamination lab, the checkpoint before fine-tuning). A row's score is
its log-likelihood under the model minus under the reference: what the row itself brings
(length, rare values, how predictable its columns are) moves both and cancels, what the model
learnt of these very rows does not. The pairs the real row wins are compared with the rate at
which the best data-only rule prefers it on the same pairs (the blind check,
``tabmem.stats.blind_check``); the one-sided paired sign-flip permutation test of the scores
(Maini et al. 2024 aggregate many weak per-row signals so) is reported beside it.

The null is that the model prefers real rows to twin rows no more than the reference does.
That fails when the model knows the data's distribution much better than the reference (real
rows are more plausible than a Gaussian copula's draws to a model that knows the domain), so a
reference close to the model (its base checkpoint, a model of its size and kind) is the one
to use; docs/logprob_tests.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tabmem.battery.base import TestContext
from tabmem.battery.file_pass import scored_reads
from tabmem.battery.lifecycle import Answer, register_lifecycle
from tabmem.battery.twin_pairs import (
    TwinFacts,
    TwinPair,
    TwinPairSettings,
    TwinPairTest,
    pair_record,
)
from tabmem.errors import ConfigError
from tabmem.llm.client import LanguageModel
from tabmem.llm.logprobs import has_logprobs, no_logprobs_reason
from tabmem.llm.registry import build_model
from tabmem.paths import conf_dir
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.likelihood import loglik_ratio


@dataclass(frozen=True)
class ReferenceRatioSettings(TwinPairSettings):
    """``conf/test/reference_ratio.yaml``."""

    reference_models: list[str]


def reference_choice(candidates: Sequence[str], model: str) -> str | None:
    """The first candidate reference that is not the model under test (a model is its own
    reference only trivially: every difference is 0), or None."""
    return next((c for c in candidates if c != model and Path(c).stem != model), None)


def reference_config(name: str) -> dict[str, Any]:
    """The model config of a reference: ``conf/model/<name>.yaml``, or a YAML file's path (a
    lab checkpoint's config lives outside ``conf/``)."""
    path = Path(name).expanduser() if name.endswith((".yaml", ".yml")) else None
    path = path or conf_dir() / "model" / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (conf_dir() / "model").glob("*.yaml")))
        raise ConfigError(
            f"The reference model '{name}' has no config: name one in conf/model/ ({known}) "
            "or give the path of a model YAML file in test.reference_models."
        )
    return yaml.safe_load(path.read_text())


def build_reference(ctx: TestContext, cfg: dict[str, Any]) -> LanguageModel:
    """The reference model, built from its config beside the model under test: the same
    response cache, and weights where the runner keeps them (``<outputs_dir>/weights``,
    beside ``<outputs_dir>/cache``)."""
    model = ctx.model_for("Asking")
    cache = model.cache
    outputs = cache.path.parent.parent if cache is not None else Path("outputs")
    return build_model(
        cfg, cache, outputs / "weights", show_progress=model.show_progress, plan=model.plan
    )


def reference_reads(
    test: Any, ctx: TestContext, cfg: dict[str, Any], requests: Sequence[Any]
) -> list[tuple[Any, ...]]:
    """Each of ``requests`` read by the reference model (``test.reference_model``, built for
    this cell and closed after it); one without log-probabilities is a configuration error."""
    reference = test.reference_model(ctx, cfg)
    try:
        if not has_logprobs(reference.backend):
            raise ConfigError(
                f"The reference {no_logprobs_reason(reference)}; set test.reference_models."
            )
        return scored_reads(reference, requests, f"{test.title} reference on {ctx.dataset.name}")
    finally:
        reference.close()


def paired_answers(
    worded: Any, tested: Sequence[tuple[Any, ...]], theirs: Sequence[tuple[Any, ...]]
) -> list[Answer[TwinPair]]:
    """One answer per pair: the model's reads of its two rows, then the reference's."""
    return [
        Answer(i, query, "", (*mine, *other), request)
        for i, (query, request, mine, other) in enumerate(
            zip(worded.queries, worded.requests, tested, theirs, strict=True)
        )
    ]


@dataclass(frozen=True)
class ReferenceFacts(TwinFacts):
    """The twin's record and the reference model's name and config."""

    reference: str
    reference_cfg: dict[str, Any]


@register_lifecycle
class ReferenceRatio(TwinPairTest[ReferenceFacts]):
    """Real rows against twin rows, each scored by the model minus by a reference model."""

    name = "reference_ratio"
    claims = "rows_seen"
    title = "reference ratio"
    settings = ReferenceRatioSettings
    statistic = "log-likelihood ratio to the reference"
    keys = ("ratio_real", "ratio_twin")

    def plan(self, ctx: TestContext) -> tuple[list[TwinPair], ReferenceFacts] | TestResult:
        p = ctx.params
        model = ctx.model.name if ctx.model is not None else ""
        reference = reference_choice(p.reference_models, model)
        if reference is None:
            listed = ", ".join(p.reference_models) or "none"
            return TestResult.not_applicable(
                self.name,
                f"no reference model: test.reference_models lists {listed}, and the test needs "
                f"one that is not the model under test ({model}) and gives log-probabilities",
            )
        cfg = reference_config(reference)
        planned = self.pairs(ctx)
        if isinstance(planned, TestResult):
            return planned
        pairs, twin = planned
        return pairs, ReferenceFacts(**vars(twin), reference=str(cfg["name"]), reference_cfg=cfg)

    def reference_model(self, ctx: TestContext, cfg: dict[str, Any]) -> LanguageModel:
        """The reference model (``build_reference``)."""
        return build_reference(ctx, cfg)

    def run_planned(
        self, ctx: TestContext, queries: list[TwinPair], facts: ReferenceFacts
    ) -> TestResult:
        """Ask the model, then the reference (built for this cell and closed after it)."""
        worded = self.word(ctx, queries, facts)
        tested = self.ask(ctx, worded.requests)
        theirs = reference_reads(self, ctx, facts.reference_cfg, worded.requests)
        return self.judge(ctx, facts, paired_answers(worded, tested, theirs), worded.context)

    def score(
        self, ctx: TestContext, facts: ReferenceFacts, answer: Answer[TwinPair]
    ) -> QueryRecord:
        real, twin, ref_real, ref_twin = answer.response

        def scores() -> dict[str, float]:
            return {
                "loglik_real": real.total,
                "loglik_twin": twin.total,
                "reference_loglik_real": ref_real.total,
                "reference_loglik_twin": ref_twin.total,
                "ratio_real": loglik_ratio(real.logprobs, ref_real.logprobs),
                "ratio_twin": loglik_ratio(twin.logprobs, ref_twin.logprobs),
                "tokens_real": len(real.logprobs),
                "reference_tokens_real": len(ref_real.logprobs),
            }

        return pair_record(
            answer.query, answer.response, scores, self.keys, facts, answer.request, ctx.dataset
        )

    def decide(
        self,
        ctx: TestContext,
        facts: ReferenceFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        return self.shift(ctx, facts, records, {"reference_model": facts.reference}, context)
