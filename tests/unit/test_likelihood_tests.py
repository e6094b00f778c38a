"""reference_ratio and zlib_ratio on hand-made files, with scripted models that score text."""

import csv
import io
import random
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from harness import settings_of

from tabmem.battery.base import TestContext, run_test
from tabmem.battery.reference_ratio import ReferenceRatio, reference_choice, reference_config
from tabmem.battery.twin_pairs import twin_pairs
from tabmem.battery.zlib_ratio import ZlibRatio
from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.data.twin import twin_of
from tabmem.errors import ConfigError
from tabmem.llm.client import LanguageModel
from tabmem.results import Verdict
from tabmem.stats.blind_check import EXPLAINED
from tabmem.stats.verdicts import reaches

# Values scattered by a multiplicative hash: rows in no order, drawn from a few columns.
TEXT = "x,y,label\n" + "".join(
    f"{i * 37 % 101}.{i * 7 % 10},{i * 53 % 97},k{i % 3}\n" for i in range(1, 121)
)


def dataset(text=TEXT, name="toy"):
    return Dataset(spec=DatasetSpec(name=name, family=name), path=Path("toy.csv"), text=text)


class Scorer:
    """One token per character, each as likely as its character makes it (what a row itself
    brings), plus ``bonus`` nats per token on the rows of ``seen`` and a per-row wobble of up
    to ``noise`` nats per token that depends on the scorer and the text alone."""

    def __init__(self, name, seen=(), bonus=0.0, noise=0.05):
        self.identity = {"provider": "test", "model": name}
        self.name, self.seen, self.bonus, self.noise = name, set(seen), bonus, noise
        self.contexts = []

    def logprobs(self, text, context=""):
        self.contexts.append((context, text))
        wobble = (zlib.crc32(f"{self.name}|{text}".encode()) % 1000 / 1000 - 0.5) * self.noise
        extra = self.bonus if text in self.seen else 0.0
        return [-(1 + ord(c) % 7 / 7) + wobble + extra for c in text]

    def chat(self, messages, params):
        return ""

    def complete(self, prompt, params):
        return ""

    def close(self):
        pass


class Speaker(Scorer):
    """Writes text and scores none."""

    logprobs = None


def model(backend, name=None):
    name = name or backend.identity["model"]
    return LanguageModel(backend, name, prompt_form="completion", show_progress=False)


class WithReference(ReferenceRatio):
    """The test with a scripted reference model in place of one built from conf/model/."""

    def __init__(self, reference):
        self.reference = reference
        self.built = []

    def reference_model(self, ctx, cfg):
        self.built.append(cfg["name"])
        return model(self.reference)


def context(test, backend, data=None, seed=0, name=None, **params):
    return TestContext(data or dataset(), model(backend, name), settings_of(test, **params), seed)


ROWS = dataset().rows


def test_a_model_that_read_the_file_is_evidence_against_its_base_model():
    # 0.05 nats a token is a twentieth of the spread between characters: invisible row by
    # row, plain over 50 pairs once the reference takes out what each row brings.
    test = WithReference(Scorer("base"))
    result = test.run(context("reference_ratio", Scorer("tuned", ROWS, bonus=0.05)))
    assert result.verdict == Verdict.EVIDENCE, result.reason
    # every row of the file (120, below the cap) is scored
    assert result.p_value < 0.01 and result.metrics["pairs_scored"] == 120
    assert result.n_hits == result.metrics["pairs_won"] > 100
    assert result.info["reference_model"] == "smollm2-135m-hf" == test.built[0]
    record = result.records[0]
    assert record.extra["ratio_real"] == pytest.approx(
        record.extra["loglik_real"] - record.extra["reference_loglik_real"]
    )


def test_the_reference_model_takes_out_more_than_zlib_does():
    # The same model and pairs: zlib cannot take out how likely each character is to the
    # models, the base model can, so the shift stands out more against it.
    tuned = Scorer("tuned", ROWS, bonus=0.05)
    against_base = WithReference(Scorer("base")).run(context("reference_ratio", tuned))
    against_zlib = ZlibRatio().run(context("zlib_ratio", tuned, context_rows=5))
    assert against_base.metrics["effect"] > 2 * against_zlib.metrics["effect"] > 0
    assert against_base.p_value <= against_zlib.p_value


@pytest.mark.parametrize("seed", range(4))
def test_a_model_that_read_nothing_is_no_evidence(seed):
    test = WithReference(Scorer("base"))
    result = test.run(context("reference_ratio", Scorer("other"), seed=seed))
    assert result.verdict != Verdict.EVIDENCE, result.reason
    assert result.p_value > 0.01


def test_a_reference_with_the_models_own_weights_is_not_applicable():
    # the lab's base checkpoint against the base model: every pair tied, no verdict possible
    result = WithReference(Scorer("base")).run(context("reference_ratio", Scorer("base")))
    assert result.verdict == Verdict.NOT_APPLICABLE, result.reason
    assert "0 of 120 pairs differ" in result.reason and "120 tied" in result.reason


def test_differences_within_the_tolerance_are_ties():
    # the same weights in other GPU batches: scores a rounding error apart, no verdict
    jitter = Scorer("base", noise=0.05)
    rounded = Scorer("base", noise=0.05)
    rounded.logprobs = lambda text, context="": [
        v + 1e-7 * (len(text) % 3) for v in jitter.logprobs(text, context)
    ]
    result = WithReference(jitter).run(context("reference_ratio", rounded))
    assert result.verdict == Verdict.NOT_APPLICABLE, result.reason
    exact = WithReference(jitter).run(context("reference_ratio", rounded, tie_tolerance=0.0))
    assert exact.verdict != Verdict.NOT_APPLICABLE  # without it, noise is scored as pairs


def test_what_the_reference_knows_as_well_cancels():
    # Both models find real rows likelier than twin rows by the same margin (they know the
    # domain better than the twin's copula): the reference takes it out, zlib cannot.
    knows = Scorer("knows", ROWS, bonus=0.3)
    result = WithReference(Scorer("also", ROWS, bonus=0.3)).run(context("reference_ratio", knows))
    assert result.verdict != Verdict.EVIDENCE, result.reason
    assert abs(result.metrics["mean_difference"]) < 1
    fooled = ZlibRatio().run(context("zlib_ratio", Scorer("knows", ROWS, bonus=0.3)))
    assert fooled.verdict == Verdict.EVIDENCE, fooled.reason


def test_zlib_ratio_finds_a_model_that_read_the_file():
    result = ZlibRatio().run(context("zlib_ratio", Scorer("tuned", ROWS, bonus=0.5)))
    assert result.verdict == Verdict.EVIDENCE, result.reason
    assert reaches(result.metrics["effect"], 0.2) and result.metrics["win_rate"] == 1.0
    # the baseline is the best data-only rule's rate on the same pairs (a coin flip at least)
    assert result.baseline == max(0.5, result.metrics["data_only_rate"]) >= 0.5
    record = result.records[0]
    assert record.extra["score_real"] == pytest.approx(
        -record.extra["bits_real"] / record.extra["zlib_bits_real"]
    )


def _rule_row(draw: random.Random) -> str:
    x, y = draw.randrange(4), draw.randrange(4)
    z = (x + y) % 4 if draw.random() > 0.1 else draw.randrange(4)
    return f"{x},{y},{z},{draw.random():.2f}\n"


def follows_rule(text: str) -> bool:
    x, y, z, _ = text.split(",")
    return int(z) == (int(x) + int(y)) % 4


_draw = random.Random(0)
# Nine rows in ten follow z = x + y mod 4, a rule that neither x nor y shows alone: the twin's
# trees draw z from columns whose values go with it, so its rows mostly break the rule, while a
# nearest-neighbour model of the file (which has other rows of the same x and y) sees it.
RULE = "x,y,z,w\n" + "".join(_rule_row(_draw) for _ in range(300))


class RuleKnower(Scorer):
    """Has read no row, but knows the rule that writes the file (a textbook's knowledge of the
    domain): a nat a token more on every row that follows it."""

    def logprobs(self, text, context=""):
        lift = 1.0 if follows_rule(text) else 0.0
        return [v + lift for v in super().logprobs(text, context)]


@pytest.mark.parametrize("seed", range(3))
def test_a_model_that_knows_what_the_twin_misses_but_read_no_row_gets_no_evidence(seed):
    # Issue 54: a twin that misses part of the joint distribution makes real rows "more
    # typical" to anything that knows the domain. The model prefers the real row in about 85 %
    # of the pairs, as the data-only rules do: under a coin-flip null both tests call that
    # evidence (sign-flip p = 0.0005, effect above 1); against the rules, nothing.
    data = dataset(RULE, "rule")
    zlib_ratio = ZlibRatio().run(context("zlib_ratio", RuleKnower("knows"), data, seed=seed))
    against_base = WithReference(Scorer("base")).run(
        context("reference_ratio", RuleKnower("knows"), data, seed=seed)
    )
    for result in (zlib_ratio, against_base):
        assert result.verdict != Verdict.EVIDENCE, result.reason
        assert result.metrics["win_rate"] >= 0.8
        assert result.metrics["sign_flip_p_value"] < 0.01 and result.metrics["effect"] > 1
        assert result.baseline == result.metrics["data_only_rate"] >= 0.8
        assert result.info["baseline_set_by"] != "chance"
        assert result.metrics["distribution_explains"] == 1.0
        assert EXPLAINED in result.reason and result.info["baseline_set_by"] in result.reason
        chances = result.records[0].extra["baseline_chances"]
        assert set(chances) >= {"nearest neighbours", "copula conditional", "chance"}


def test_on_such_a_file_a_model_that_read_the_rows_can_still_be_told_apart():
    # The same file, a model that has read its rows and knows no rule: it wins nearly every
    # pair, beyond the best rule's rate (about 0.8) by more than the margin of 0.1, and the
    # reason says that the rule alone would have been evidence against a coin flip.
    data = dataset(RULE, "rule")
    tuned = Scorer("tuned", data.rows, bonus=0.5)
    result = ZlibRatio().run(context("zlib_ratio", tuned, data, n_rows=100))
    assert result.metrics["win_rate"] >= 0.95 and result.p_value < 0.01
    assert 0.7 < result.baseline < 0.9 and result.verdict == Verdict.EVIDENCE, result.reason
    assert "beyond the best data-only rule, which alone would be evidence" in result.reason


class TitleKnower(Scorer):
    """Has read no row of titanic but knows that a Mr. is a man and a Miss a woman: a row
    that says otherwise loses 15 nats."""

    def logprobs(self, text, context=""):
        name, sex = next(csv.reader(io.StringIO(text)))[3:5]
        title = re.search(r" (Mr|Master|Mrs|Miss)\. ", name)
        male = title is not None and title.group(1) in ("Mr", "Master")
        scores = super().logprobs(text, context)
        if title is not None and male != (sex == "male"):
            scores[-1] -= 15.0
        return scores


@pytest.mark.parametrize("seed", range(2))
def test_a_model_that_knows_titles_finds_no_twin_row_odd(seed):
    # Drawn from any row, a twin's name disagreed with its sex in nearly half the rows, and
    # this scorer preferred the real row in 0.69-0.72 of 300 pairs against a nearest-neighbour
    # baseline of 0.61: evidence at seeds 0 and 2. The twin now keeps the title with the sex.
    data = load_dataset(dataset_specs()["titanic"])
    result = ZlibRatio().run(context("zlib_ratio", TitleKnower("knows"), data, seed, n_rows=300))
    assert result.verdict == Verdict.NO_EVIDENCE, result.reason
    assert result.metrics["win_rate"] < 0.55 and result.metrics["pairs_scored"] == 300


def test_where_no_rule_goes_far_a_model_that_read_the_rows_gets_evidence():
    tuned = Scorer("tuned", ROWS, bonus=0.5)
    result = ZlibRatio().run(context("zlib_ratio", tuned, seed=1, n_rows=50))
    assert result.metrics["win_rate"] == 1.0 and result.baseline < 0.6
    assert result.verdict == Verdict.EVIDENCE, result.reason
    assert result.p_value == pytest.approx(result.baseline**50)


def test_zlib_ratio_on_a_model_that_read_nothing_is_no_evidence():
    for seed in range(3):
        result = ZlibRatio().run(context("zlib_ratio", Scorer("fresh"), seed=seed))
        assert result.verdict != Verdict.EVIDENCE, result.reason


def test_both_rows_of_a_pair_are_read_after_the_same_real_context():
    # One pass over the file: each real row after the header and every row before it (the
    # file fits one window), its twin row in its place after exactly the same text.
    data = dataset()
    tuned, base = Scorer("tuned", ROWS, bonus=0.05), Scorer("base")
    result = WithReference(base).run(context("reference_ratio", tuned))
    assert result.metrics["passes"] == 1 and result.metrics["window_tokens"] == 2048
    for backend in (tuned, base):
        assert len(backend.contexts) == 240
        for (c1, real), (c2, twin) in zip(
            backend.contexts[::2], backend.contexts[1::2], strict=True
        ):
            assert c1 == c2 and real in data.rows and twin not in data.rows
            index = data.rows.index(real)
            lines = c1.splitlines()
            assert lines[0] == data.header and lines[1:] == data.rows[:index]
    assert [r.extra["context_rows"] for r in result.records] == [
        data.rows.index(r.expected) for r in result.records
    ]


def test_with_no_window_each_pair_has_its_own_copy_of_the_rows_before_it():
    data = dataset()
    tuned, base = Scorer("tuned", ROWS, bonus=0.05), Scorer("base")
    WithReference(base).run(context("reference_ratio", tuned, n_rows=12, window_tokens=0))
    for backend in (tuned, base):
        assert len(backend.contexts) == 24
        for (c1, real), (c2, twin) in zip(
            backend.contexts[::2], backend.contexts[1::2], strict=True
        ):
            assert c1 == c2 and real in data.rows and twin not in data.rows
            index = data.rows.index(real)
            lines = c1.splitlines()
            assert lines[0] == data.header and lines[1:] == data.rows[max(0, index - 5) : index]


def test_passes_overlap_so_that_every_row_has_at_least_its_context_rows():
    # A window of about 20 rows: the file is read in several passes, each starting five rows
    # before the first row it scores.
    data = dataset()
    scorer = Scorer("m")
    result = ZlibRatio().run(context("zlib_ratio", scorer, window_tokens=80, context_rows=5))
    assert result.metrics["passes"] > 4 and result.metrics["pairs_scored"] == 120
    assert result.metrics["context_rows_min"] == 0  # the first row of the file
    assert all(r.extra["context_rows"] >= min(5, r.extra["row"] - 1) for r in result.records)
    for c, text in scorer.contexts:
        lines = c.splitlines()
        index = data.rows.index(text) if text in data.rows else None
        if index is not None:
            assert lines[1:] == data.rows[index - len(lines) + 1 : index]


def test_in_a_file_in_order_the_pairs_are_read_after_the_header_alone():
    # Ten regions of 30 rows, a place value near its region's: the rows before a real row
    # say where it is, which no twin row (drawn from the whole file) matches.
    rng = np.random.default_rng(0)
    places = dataset(
        "place,size\n"
        + "".join(f"{10 * (i // 30) + rng.random():.2f},{rng.random():.2f}\n" for i in range(300)),
        "places",
    )
    scorer = Scorer("m")
    result = ZlibRatio().run(context("zlib_ratio", scorer, places, context_rows=5))
    assert {c for c, _ in scorer.contexts} == {places.header + "\n"}
    assert "in order" in result.info["context"] and result.metrics["file_order_p_value"] < 0.01
    unordered = ZlibRatio().run(context("zlib_ratio", Scorer("m"), context_rows=5))
    assert unordered.info["context"].startswith("the header and the real rows before the row")
    assert unordered.metrics["file_order_p_value"] > 0.01
    copies = ZlibRatio().run(context("zlib_ratio", Scorer("m"), context_rows=5, window_tokens=0))
    assert copies.info["context"] == "the header and the 5 real rows before the row"


def test_pairs_take_the_twin_row_at_the_same_place():
    data = dataset()
    twin = twin_of(data, 3)
    pairs = twin_pairs(data, twin, 10, np.random.default_rng(0))
    assert [p.row for p in pairs] == sorted(p.row for p in pairs)
    assert all(p.twin == twin.rows[p.row - 1] and p.real == data.rows[p.row - 1] for p in pairs)
    assert pairs == twin_pairs(data, twin, 10, np.random.default_rng(0))


def test_on_the_twin_a_model_that_read_the_file_is_no_evidence():
    # transform=twin: the cell's file is the twin, which the model never read.
    twin = twin_of(dataset(), 0)
    test = WithReference(Scorer("base"))
    tuned = Scorer("tuned", ROWS, bonus=0.3)
    result = test.run(context("reference_ratio", tuned, twin, tie_tolerance=0.0))
    assert result.verdict != Verdict.EVIDENCE, result.reason
    assert result.metrics["pairs_tied"] == 0 and result.p_value > 0.01


def test_the_reference_is_the_first_candidate_that_is_not_the_model():
    assert reference_choice(["smollm2-135m-hf", "gemma3-270m-hf"], "lab-x-p8") == "smollm2-135m-hf"
    assert reference_choice(["smollm2-135m-hf", "gemma3-270m-hf"], "smollm2-135m-hf") == (
        "gemma3-270m-hf"
    )
    assert reference_choice(["conf/model/gemma3-270m-hf.yaml"], "gemma3-270m-hf") is None
    assert reference_config("gemma3-270m-hf")["backend"] == "transformers"


def test_a_model_checked_against_itself_alone_is_not_applicable_before_asking():
    tuned = Scorer("smollm2-135m-hf", ROWS, bonus=0.5)
    test = WithReference(Scorer("base"))
    result = test.run(
        context("reference_ratio", tuned, reference_models=["smollm2-135m-hf"], n_rows=20)
    )
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "no reference model" in result.reason and "smollm2-135m-hf" in result.reason
    assert tuned.contexts == [] and test.built == []
    empty = test.run(context("reference_ratio", tuned, reference_models=[]))
    assert "lists none" in empty.reason


def test_an_unknown_reference_stops_the_cell_with_its_name():
    with pytest.raises(ConfigError, match=r"'no-such-model' has no config.*smollm2-135m-hf"):
        ReferenceRatio().run(
            context("reference_ratio", Scorer("m"), reference_models=["no-such-model"])
        )


def test_a_reference_without_logprobs_stops_the_cell():
    with pytest.raises(ConfigError, match=r"reference model 'speaker'.*gives no log-probabilities"):
        WithReference(Speaker("speaker")).run(context("reference_ratio", Scorer("m")))


@pytest.mark.parametrize("test", ["reference_ratio", "zlib_ratio"])
def test_a_model_without_logprobs_is_not_applicable(test):
    backend = Speaker("speaker")
    result = run_test(test, context(test, backend))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "gives no log-probabilities" in result.reason


def test_a_time_series_has_no_twin_to_compare_with():
    series = load_dataset(dataset_specs()["wti-oil"])
    result = ZlibRatio().run(context("zlib_ratio", Scorer("m"), series))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "no twin" in result.reason and "time series" in result.reason


def test_a_small_file_is_not_applicable():
    small = dataset("a,b\n" + "".join(f"{i * 3.7:.1f},{i * 7 % 5}\n" for i in range(8)), "small")
    result = ZlibRatio().run(context("zlib_ratio", Scorer("m"), small))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "needs 10 pairs" in result.reason


def test_failed_scores_are_failed_queries_not_crashes():
    class Failing(Scorer):
        def logprobs(self, text, context=""):
            raise RuntimeError("device lost")

    result = ZlibRatio().run(context("zlib_ratio", Failing("m"), n_rows=12))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert len(result.records) == 12
    assert all(r.error and "device lost" in r.error for r in result.records)
