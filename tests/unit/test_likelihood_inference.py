"""The learned likelihood test (likelihood_inference) and its statistics, with scripted scorers
whose signals are known."""

import zlib
from pathlib import Path

import numpy as np
import pytest
from harness import settings_of
from test_likelihood_tests import RULE, RuleKnower

from tabmem.battery import twin_pairs
from tabmem.battery.base import TestContext, claiming
from tabmem.battery.likelihood_inference import RULES_COMBINED, LikelihoodInference
from tabmem.battery.min_k_plus_plus import MinKPlusPlus
from tabmem.battery.zlib_ratio import ZlibRatio
from tabmem.data import Dataset, DatasetSpec
from tabmem.llm.client import LanguageModel
from tabmem.results import Verdict
from tabmem.stats.learned_pairs import (
    fit_pairs,
    fit_positive,
    halves,
    held_out_test,
    overdispersed_greater,
)
from tabmem.stats.likelihood import membership_features
from tabmem.stats.pvalues import binomial_greater
from tabmem.suites import suite_members

_draw = np.random.default_rng(5)
# Three independent columns: the twin's copula draws rows no data-only rule tells from real.
_COLOURS = ["red", "green", "blue"]
PLAIN = "a,b,c\n" + "".join(
    f"{_draw.normal(50, 10):.1f},{_draw.integers(0, 100)},{_draw.choice(_COLOURS)}\n"
    for _ in range(600)
)


def dataset(text=PLAIN, name="plain"):
    return Dataset(spec=DatasetSpec(name=name, family=name), path=Path("p.csv"), text=text)


def _wobble(name: str, text: str, channel: int) -> float:
    """A row's draw in (-1/2, 1/2) for one channel, fixed by the scorer and the text."""
    return zlib.crc32(f"{name}|{channel}|{text}".encode()) % 10007 / 10007 - 0.5


class Weak:
    """One token per character, as likely as its character makes it, and three signals per row
    that each move another feature, each with its own noise: the level of every token (the
    mean log-probability and the zlib ratio), the share of the row's lowest fifth of tokens
    against the rest at an equal total (Min-K% alone), and how far each token lies above its
    position's expectation (Min-K%++ alone). On the rows of ``seen`` each signal rises by
    ``bonus``, a tenth of its noise's range: a small shift in every feature."""

    def __init__(self, name, seen=(), bonus=0.0):
        self.identity = {"provider": "test", "model": name}
        self.name, self.seen, self.bonus = name, set(seen), bonus

    def triples(self, text):
        lift = self.bonus if text in self.seen else 0.0
        base = [-(1 + ord(c) % 7 / 7) for c in text]
        low = set(sorted(range(len(text)), key=lambda i: base[i])[: max(1, len(text) // 5)])
        level = lift + _wobble(self.name, text, 1)
        tilt = lift + _wobble(self.name, text, 2)
        rest = -tilt * len(low) / max(1, len(text) - len(low))
        lps = [v + level + (tilt if i in low else rest) for i, v in enumerate(base)]
        z = 1 + lift + _wobble(self.name, text, 3)
        return [(lp, lp - z, 1.0) for lp in lps]

    def logprobs(self, text, context=""):
        return [t[0] for t in self.triples(text)]

    def logprob_moments_batch(self, items):
        return [self.triples(text) for _, text in items]

    def count_tokens(self, text):
        return len(text)

    def chat(self, messages, params):
        return ""

    def complete(self, prompt, params):
        return ""


def run(test, backend, data=None, seed=0, **params):
    model = LanguageModel(backend, backend.name, prompt_form="completion", show_progress=False)
    settings = settings_of(test.name, **params)
    return test().run(TestContext(data or dataset(), model, settings, seed))


@pytest.fixture
def rules_at_chance(monkeypatch):
    """The blind check's rules at a coin flip on every pair (as they are, near enough, on this
    file): the tests below are about the learned score, not the rules (seconds, not minutes)."""

    def chance(dataset, pairs, statistic=None):
        return {row: {"nearest neighbours": 0.5, "mode": 0.5, "chance": 0.5} for row, _, _ in pairs}

    monkeypatch.setattr(twin_pairs, "pair_chances", chance)


def test_weak_signals_in_several_features_add_up_where_each_test_alone_falls_short(
    rules_at_chance,
):
    # real rows gain a tenth of their noise in three signals: each single test stays below the
    # margin at every seed; the learned score wins more pairs than either at each seed, and
    # clears the margin at most (seed 2 draws pairs where all three win least)
    data = dataset()
    found = 0
    for seed in range(3):
        tuned = Weak("tuned", data.rows, bonus=0.1)
        learned = run(
            LikelihoodInference, tuned, seed=seed, reference_models=[], n_permutations=199
        )
        assert learned.p_value < 0.01, learned.reason
        found += learned.verdict == Verdict.EVIDENCE
        assert learned.metrics["pairs_scored"] == 600 and learned.baseline == 0.5
        assert learned.metrics["n_features"] == 6  # mean, Min-K% at 10, 20, 50, zlib, Min-K%++
        assert learned.metrics["permutation_p_value"] == pytest.approx(1 / 200)
        assert learned.metrics["design_effect"] >= 1.0
        for single in (ZlibRatio, MinKPlusPlus):
            alone = run(single, Weak("tuned", data.rows, bonus=0.1), seed=seed)
            assert alone.verdict != Verdict.EVIDENCE, alone.reason
            assert alone.metrics["win_rate"] < learned.rate
    assert found >= 2
    record = learned.records[0]
    assert set(record.extra["features_real"]) == set(record.extra["features_twin"])
    assert record.extra["baseline_chances"][RULES_COMBINED] in (0.0, 0.5, 1.0)
    assert record.score == float(record.extra["margin"] > 0)


@pytest.mark.parametrize("seed", range(4))
def test_a_scorer_that_knows_nothing_gets_no_evidence(seed):
    data = dataset("\n".join(PLAIN.split("\n")[:151]) + "\n")  # 150 rows
    result = run(LikelihoodInference, Weak("fresh"), data, seed, reference_models=[])
    assert result.verdict != Verdict.EVIDENCE, result.reason
    assert result.p_value > 0.01 and result.metrics["pairs_scored"] == 150
    assert result.metrics["permutation_p_value"] > 0.01


@pytest.mark.parametrize("seed", range(2))
def test_a_scorer_that_knows_what_the_twin_misses_but_read_no_row_gets_no_evidence(seed):
    # Nine rows in ten follow a rule that the twin misses (z = x + y mod 4, which neither x
    # nor y shows alone): the scorer knows it and prefers the real row in most pairs; the
    # data-only pipeline learns it from the file and sets a baseline close enough that the
    # scorer does not clear the margin over it.
    data = dataset(RULE, "rule")
    result = run(LikelihoodInference, RuleKnower("knows"), data, seed, reference_models=[])
    assert result.verdict != Verdict.EVIDENCE, result.reason
    assert result.rate >= 0.75 and result.baseline >= 0.7
    assert result.metrics["permutation_p_value"] < 0.01  # against a coin flip it would pass


def test_a_reference_model_adds_its_ratio_as_a_feature(rules_at_chance):
    from test_likelihood_tests import Scorer

    class WithReference(LikelihoodInference):
        def reference_model(self, ctx, cfg):
            return LanguageModel(Scorer("base"), "base", prompt_form="completion")

    data = dataset("\n".join(PLAIN.split("\n")[:201]) + "\n")
    model = LanguageModel(Scorer("tuned", data.rows, 0.05), "tuned", prompt_form="completion")
    settings = settings_of("likelihood_inference", n_permutations=99)
    result = WithReference().run(TestContext(data, model, settings, 0))
    assert "reference_ratio" in result.info["features"]
    assert result.info["reference_model"] == "smollm2-135m-hf"
    assert result.verdict == Verdict.EVIDENCE, result.reason


def test_it_is_a_test_of_rows_seen_and_a_member_of_the_likelihood_suite():
    assert "likelihood_inference" in claiming("rows_seen")
    from tabmem.suites import _test_config

    members = suite_members(_test_config("likelihood"))
    assert members[-1] == "likelihood_inference" and "min_k_plus_plus" in members


# The statistics.


def test_the_paired_logistic_regression_finds_the_direction_of_the_differences():
    rng = np.random.default_rng(0)
    d = rng.normal(size=(400, 3)) + np.array([0.5, 0.0, -0.5])
    w = fit_pairs(d, penalty=1.0)
    assert w[0] > 0.3 and abs(w[1]) < 0.2 and w[2] < -0.3
    positive = fit_positive(d, penalty=1.0)
    assert positive[0] > 0.3 and positive[2] == 0.0 and (positive >= 0).all()


def test_held_out_margins_are_scored_by_the_other_halfs_fit():
    rng = np.random.default_rng(1)
    real = rng.normal(size=(200, 2)) + np.array([0.4, 0.0])
    other = rng.normal(size=(200, 2))
    half = halves(200, rng)
    assert abs(int(half.sum()) - 100) <= 1
    test = held_out_test(real, other, half, 1.0, 99, rng)
    assert test.wins + test.losses + test.ties == 200
    assert test.win_rate > 0.55 and test.p_value <= 0.05
    nulls = [
        held_out_test(*rng.normal(size=(2, 200, 2)), half, 1.0, 99, rng).p_value for _ in range(10)
    ]
    assert sum(p <= 0.05 for p in nulls) <= 2 and np.median(nulls) > 0.2


def test_the_widened_binomial_holds_its_level_where_the_plain_one_does_not():
    # Scorers that know nothing, 178 pairs of three strongly related features: the held-out
    # count spreads wider than a binomial's, so the plain binomial rejects too often.
    rng = np.random.default_rng(2)
    plain = widened = 0
    for _ in range(300):
        latent = rng.normal(size=(2, 178, 1))
        real, other = 0.9 * latent + 0.44 * rng.normal(size=(2, 178, 3))
        test = held_out_test(real, other, halves(178, rng), 1.0, 49, rng)
        plain += binomial_greater(test.wins, test.untied, 0.5) < 0.01
        effect = test.design_effect
        widened += overdispersed_greater(test.wins, test.untied, 0.5, effect) < 0.01
    assert plain >= 8 and widened <= 4  # of 300 at 0.01: 12 and 2 on this seed


def test_the_widened_tail_is_the_binomial_at_a_design_effect_of_one():
    assert overdispersed_greater(70, 100, 0.55, 1.0) == binomial_greater(70, 100, 0.55)
    assert overdispersed_greater(70, 100, 0.55, 1.6) > binomial_greater(70, 100, 0.55)
    assert overdispersed_greater(0, 100, 0.5, 2.0) == 1.0


def test_each_feature_is_computed_as_its_own_test_computes_it():
    logprobs = [-1.0, -2.0, -0.5, -3.0]
    features = membership_features(
        logprobs, "1,2", [25, 50], ([-1.0] * 4, [1.0] * 4), 25, [-1.5] * 4
    )
    assert features["mean_logprob"] == pytest.approx(-1.625)
    assert features["min_k_25"] == -3.0 and features["min_k_50"] == -2.5
    assert features["min_k_plus_plus"] == pytest.approx(-2.0)
    assert features["reference_ratio"] == pytest.approx(-6.5 + 6.0)
    assert features["zlib_ratio"] < 0
