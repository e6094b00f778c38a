"""The learned likelihood test: many weak membership signals of each row, combined by a
classifier that is fitted on half of the file's rows and judged on the other half (after Maini
et al. 2024, "LLM Dataset Inference").

Every row of the file (up to the cap, sampled above it) and the twin's row at its place are
read after the same context, as the twin tests read them (``battery.twin_pairs``,
``battery.file_pass``: the same passes, so in a suite their scores come from the cache). Each
row gets the features the single tests compute, each by the same function
(``tabmem.stats.likelihood.membership_features``): its mean token log-probability, Min-K% at a
few k, the zlib ratio, Min-K%++ where the model gives the moments of its distributions, and
the ratio to a reference model where one is configured. A logistic regression for matched
pairs, fitted on a random half of the pairs, scores each pair of the other half: the pair is
won where the learned score puts the real row above its twin row; then the halves swap
(``tabmem.stats.learned_pairs``). A file read a few times moves each signal a little; where
the single tests each fall short, the combination may not.

**The decision, and its blind check.** As in the pair tests, a model that never read a row is
no coin flip against twin rows (the twin is a model's draw; docs/logprob_tests.md). So the
same pipeline is run with a data-only scorer in place of the model: each row's features are
the blind check's data-only rules' chances of picking it (``tabmem.stats.blind_check``: the
values' frequencies, nearest neighbours, the Gaussian copula, boosted trees, each fitted
without the real row), combined by the same cross-fitted classifier ("rules combined"), each
rule with a weight of at least 0. A rule may count only in its own direction: the rules are
fitted without the real row but with every other, so a rule can lean towards the twin row for
that reason alone (the values' frequencies prefer a twin row, whose values are other rows',
in every pair of a file of unique values), and turning that lean round would use knowledge of
which row is real. The baseline is the best of these, the combination and each rule alone, on
the pairs the model decided, or 1/2 where that is higher; the model's held-out wins are tested
against it, one-sided, with the binomial widened by the held-out count's own design effect
(cross-fitting couples the two halves: ``learned_pairs``), measured by running the whole
pipeline again with each pair's rows swapped at random. Those swaps also give the exact
p-value against a coin flip, reported beside it (``permutation_p_value``). ``evidence``: p <
``alpha`` and a held-out win rate ``min_win_rate`` - 1/2 above the baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tabmem.battery.base import TestContext
from tabmem.battery.file_pass import scored_reads
from tabmem.battery.lifecycle import Answer, register_lifecycle, wording_figures
from tabmem.battery.reference_ratio import (
    build_reference,
    paired_answers,
    reference_choice,
    reference_config,
    reference_reads,
)
from tabmem.battery.twin_pairs import (
    TwinFacts,
    TwinPair,
    TwinPairSettings,
    TwinPairTest,
    failure,
    rng_of,
)
from tabmem.llm.client import LanguageModel
from tabmem.llm.moments import has_moments
from tabmem.results import QueryRecord, TestResult
from tabmem.stats.best_of import BestOf
from tabmem.stats.blind_check import evidence_rule
from tabmem.stats.learned_pairs import (
    WidenedBlindCheck,
    fit_pairs,
    halves,
    held_out_test,
)
from tabmem.stats.likelihood import membership_features

RULES_COMBINED = "rules combined"
"""The blind check's data-only rules, combined by the test's own cross-fitted classifier."""


@dataclass(frozen=True)
class LikelihoodInferenceSettings(TwinPairSettings):
    """``conf/test/likelihood_inference.yaml``."""

    reference_models: list[str]
    k_percents: list[float]
    k_plus_plus: float
    penalty: float


@dataclass(frozen=True)
class InferenceFacts(TwinFacts):
    """The twin's record, and the reference model (its name and config) where one is used."""

    reference: str
    reference_cfg: dict[str, Any] | None


@register_lifecycle
class LikelihoodInference(TwinPairTest[InferenceFacts]):
    """Real rows against twin rows, each pair won or lost by a learned combination of
    membership features fitted on the other half of the pairs."""

    name = "likelihood_inference"
    claims = "rows_seen"
    title = "learned likelihood"
    settings = LikelihoodInferenceSettings
    statistic = "learned score, held out"
    keys = ("features_real", "features_twin")

    def plan(self, ctx: TestContext) -> tuple[list[TwinPair], InferenceFacts] | TestResult:
        p = ctx.params
        planned = self.pairs(ctx)
        if isinstance(planned, TestResult):
            return planned
        pairs, twin = planned
        model = ctx.model.name if ctx.model is not None else ""
        chosen = reference_choice(p.reference_models, model)
        cfg = reference_config(chosen) if chosen else None
        name = str(cfg["name"]) if cfg else ""
        return pairs, InferenceFacts(**vars(twin), reference=name, reference_cfg=cfg)

    def reference_model(self, ctx: TestContext, cfg: dict[str, Any]) -> LanguageModel:
        """The reference model, built as the reference ratio test builds it."""
        return build_reference(ctx, cfg)

    def ask(self, ctx: TestContext, requests: Sequence[Any]) -> list[Any]:
        """Each pair's two scores, with the moments of the model's distributions where it
        gives them (Min-K%++ is then one of the features)."""
        model = ctx.model_for("Asking")
        moments = has_moments(model.backend)
        return scored_reads(model, requests, f"{self.title} on {ctx.dataset.name}", moments)

    def run_planned(
        self, ctx: TestContext, queries: list[TwinPair], facts: InferenceFacts
    ) -> TestResult:
        """Ask the model, then the reference where there is one (built for this cell and
        closed after it)."""
        worded = self.word(ctx, queries, facts)
        tested = self.ask(ctx, worded.requests)
        theirs: list[tuple[Any, ...]] = [() for _ in tested]
        if facts.reference_cfg is not None:
            theirs = reference_reads(self, ctx, facts.reference_cfg, worded.requests)
        return self.judge(ctx, facts, paired_answers(worded, tested, theirs), worded.context)

    def score(
        self, ctx: TestContext, facts: InferenceFacts, answer: Answer[TwinPair]
    ) -> QueryRecord:
        """A pair's features, real row and twin row; it is won or lost only when decided."""
        p = ctx.params
        pair, where = answer.query, answer.request
        extra: dict[str, Any] = {
            "row": pair.row,
            "twin": pair.twin,
            "context_rows": where.read.context_rows(where.row),
        }
        prompt = where.read.prompt(ctx.dataset, where.row)
        error = failure(answer.response)
        if error:
            return QueryRecord(prompt, pair.real, "", 0.0, error=error, extra=extra)
        real, twin, *reference = answer.response
        for key, text, mine, ref in (
            ("features_real", pair.real, real, reference[0] if reference else None),
            ("features_twin", pair.twin, twin, reference[1] if reference else None),
        ):
            moments = (mine.means, mine.sds) if getattr(mine, "means", None) else None
            extra[key] = membership_features(
                mine.logprobs,
                text,
                p.k_percents,
                moments,
                p.k_plus_plus,
                ref.logprobs if ref is not None else None,
            )
        return QueryRecord(prompt, pair.real, "", 0.5, extra=extra)

    def decide(
        self,
        ctx: TestContext,
        facts: InferenceFacts,
        records: Sequence[QueryRecord],
        context: dict[str, Any],
    ) -> TestResult:
        p = ctx.params
        info: dict[str, Any] = {
            "twin_sha256": facts.twin_sha256,
            "context": facts.context,
            "rows": facts.rows,
            "prompt_form": "log-probabilities",
            "reference_model": facts.reference or "none",
        }
        scored = [r for r in records if r.error is None]
        if len(scored) < p.min_pairs:
            return TestResult.not_applicable(
                self.name,
                f"only {len(scored)} pairs were scored; the others failed; the test needs "
                f"{p.min_pairs}",
                info=info,
                records=list(records),
            )
        names = sorted(scored[0].extra["features_real"])
        real = np.array([[r.extra["features_real"][n] for n in names] for r in scored])
        twin = np.array([[r.extra["features_twin"][n] for n in names] for r in scored])
        half = halves(len(scored), rng_of(ctx.seed + 2))
        test = held_out_test(
            real, twin, half, p.penalty, p.n_permutations, rng_of(ctx.seed + 1), p.tie_tolerance
        )
        rules = [
            {k: v for k, v in facts.chances[r.extra["row"]].items() if k != "chance"}
            for r in scored
        ]
        rule_names = sorted(rules[0])
        data_real = np.array([[c[n] for n in rule_names] for c in rules])
        data_only = held_out_test(
            data_real,
            1.0 - data_real,
            half,
            p.penalty,
            p.n_permutations,
            rng_of(ctx.seed + 3),
            positive=True,
        )
        combined = data_only.outcomes()
        decided: dict[int, QueryRecord] = {}
        chances = []
        outcomes = test.outcomes()
        for i, record in enumerate(scored):
            pair_chances = {**facts.chances[record.extra["row"]], RULES_COMBINED: combined[i]}
            decided[id(record)] = replace(
                record,
                score=float(outcomes[i]),
                extra={
                    **record.extra,
                    "margin": float(test.margins[i]),
                    "half": int(half[i]),
                    "baseline_chances": pair_chances,
                },
            )
            if abs(test.margins[i]) > p.tie_tolerance:
                chances.append(pair_chances)
        in_order = [decided.get(id(r), r) for r in records]
        margin = p.min_win_rate - 0.5
        blind = WidenedBlindCheck(
            BestOf.of(chances), test.wins, test.untied, p.alpha, margin, test.design_effect
        )
        if test.untied < p.min_pairs:
            return TestResult.not_applicable(
                self.name,
                f"the learned score left only {test.untied} of {len(scored)} pairs untied; "
                f"the test needs {p.min_pairs}",
                info=info,
                records=in_order,
            )
        decision = blind.decision(self.statistic)
        weights = fit_pairs((real - twin) / _spread(real, twin), p.penalty)
        return TestResult(
            test=self.name,
            verdict=decision.verdict,
            reason=(
                f"held out, the learned score put the real row above its twin row in "
                f"{test.wins} of {test.untied} untied pairs ({test.ties} tied) of "
                f"{len(scored)} ({facts.rows}), from {len(names)} features "
                f"({', '.join(names)}); {decision.reason}"
            ),
            n_queries=len(records),
            n_hits=test.wins,
            rate=test.win_rate,
            baseline=blind.baseline,
            p_value=blind.p_value,
            metrics={
                **blind.metrics(),
                "pairs_scored": float(len(scored)),
                "pairs_won": float(test.wins),
                "pairs_lost": float(test.losses),
                "pairs_tied": float(test.ties),
                "win_rate": test.win_rate,
                "permutation_p_value": test.p_value,
                "design_effect": test.design_effect,
                "n_permutations": float(p.n_permutations),
                "data_only_learned_rate": data_only.win_rate,
                "data_only_learned_p_value": data_only.p_value,
                "n_features": float(len(names)),
                "rows_in_file": float(len(ctx.dataset.rows)),
                "twin_rows": float(facts.twin_rows),
                **(
                    {}
                    if facts.file_order_p_value is None
                    else {"file_order_p_value": facts.file_order_p_value}
                ),
                **{f"weight_{n}": float(w) for n, w in zip(names, weights, strict=True)},
                **wording_figures(context),
            },
            info={
                **info,
                **blind.info(),
                "features": ", ".join(names),
                "evidence_rule": evidence_rule(self.statistic, p.alpha, margin)
                + f", the binomial widened by the held-out count's design effect "
                f"({test.design_effect:.2f})",
            },
            records=in_order,
        )


def _spread(real: np.ndarray, twin: np.ndarray) -> np.ndarray:
    """Each feature's standard deviation over all rows (1 where it is constant)."""
    spread = np.concatenate([real, twin]).std(axis=0)
    return np.where(spread > 1e-12, spread, 1.0)
