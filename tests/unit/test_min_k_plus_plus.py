"""Min-K%++: its statistic, the cached scores with moments, and the test on hand-made files
with scripted models that give each position's moments."""

import io
import json
import zlib
from pathlib import Path

import pytest
from harness import settings_of
from rich.console import Console
from test_likelihood_tests import RULE, follows_rule

from tabmem.api import compose_config
from tabmem.battery.base import TestContext, run_test
from tabmem.battery.min_k_plus_plus import MinKPlusPlus
from tabmem.data import Dataset, DatasetSpec
from tabmem.dry_run import plan_cell
from tabmem.intake import read_cell
from tabmem.llm.base import LOGPROBS, TOKEN_MOMENTS, capabilities_of
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.logprobs import ScoreRequest, score_key
from tabmem.llm.moments import moments_key, score_moments
from tabmem.results import Verdict
from tabmem.stats.blind_check import EXPLAINED
from tabmem.stats.likelihood import min_k_plus_plus_score, token_zscores
from tabmem.stats.min_k import min_k_score

# Values scattered by a multiplicative hash: rows in no order, drawn from a few columns.
TEXT = "x,y,label\n" + "".join(
    f"{i * 37 % 101}.{i * 7 % 10},{i * 53 % 97},k{i % 3}\n" for i in range(1, 121)
)
ROWS = TEXT.splitlines()[1:]


def dataset(text=TEXT, name="toy"):
    return Dataset(spec=DatasetSpec(name=name, family=name), path=Path("toy.csv"), text=text)


class MomentScorer:
    """One token per character. At each position the model's distribution has a mean and sd
    of log p set by the character (how sure the model is there); the token's standardised
    score is set by the character too, plus a per-row wobble of up to ``noise`` and ``bonus``
    on the rows of ``seen``. ``flat`` lowers the mean and widens the sd on those rows instead:
    a less certain model at every position of them, with the same standardised scores."""

    def __init__(self, name, seen=(), bonus=0.0, noise=0.05, flat=0.0):
        self.identity = {"provider": "test", "model": name}
        self.name, self.seen, self.bonus, self.noise, self.flat = (
            name,
            set(seen),
            bonus,
            noise,
            flat,
        )
        self.calls = 0

    def triples(self, text):
        wobble = (zlib.crc32(f"{self.name}|{text}".encode()) % 1000 / 1000 - 0.5) * self.noise
        seen = text in self.seen
        out = []
        for c in text:
            mean = -(1 + ord(c) % 5) - (self.flat if seen else 0.0)
            sd = 0.5 + ord(c) % 3 * 0.5 + (self.flat if seen else 0.0)
            z = (ord(c) % 7 - 3) / 3 + wobble + (self.bonus if seen else 0.0)
            out.append((mean + sd * z, mean, sd))
        return out

    def logprobs(self, text, context=""):
        return [t[0] for t in self.triples(text)]

    def logprob_moments_batch(self, items):
        self.calls += len(items)
        return [self.triples(text) for _, text in items]

    def chat(self, messages, params):
        return ""

    def complete(self, prompt, params):
        return ""

    def close(self):
        pass


class PlainScorer(MomentScorer):
    """Token log-probabilities without moments (a vLLM server, the llama.cpp engine)."""

    logprob_moments_batch = None
    moments_unavailable = "its engine returns the top log-probabilities only"


def model(backend, cache=None):
    return LanguageModel(
        backend,
        backend.identity["model"],
        prompt_form="completion",
        cache=cache,
        show_progress=False,
    )


def context(backend, data=None, seed=0, **params):
    settings = settings_of("min_k_plus_plus", **params)
    return TestContext(data or dataset(), model(backend), settings, seed)


def test_each_token_is_standardised_by_its_positions_moments():
    assert token_zscores([-1.0, -3.0, -2.0], [-2.0, -2.0, -2.0], [0.5, 2.0, 0.0]) == [2.0, -0.5, 0]
    with pytest.raises(ValueError, match="one mean and one sd"):
        token_zscores([-1.0], [-1.0, -2.0], [1.0])


def test_the_score_is_the_mean_of_the_lowest_k_percent_of_standardised_tokens():
    logprobs, means, sds = [-1.0, -4.0, -2.0, -6.0, -1.5], [-2.0] * 5, [1.0, 2.0, 1.0, 2.0, 0.5]
    # standardised: 1, -1, 0, -2, 1; the lowest 40 % (2 tokens) are -2 and -1
    assert min_k_plus_plus_score(logprobs, means, sds, 40) == pytest.approx(-1.5)
    assert min_k_plus_plus_score(logprobs, means, sds, 1) == pytest.approx(-2.0)
    assert min_k_plus_plus_score(logprobs, means, sds, 100) == pytest.approx(-0.2)


def test_a_backend_with_moments_can_do_more_than_one_without():
    assert TOKEN_MOMENTS in capabilities_of(MomentScorer("m"))
    plain = capabilities_of(PlainScorer("p"))
    assert LOGPROBS in plain and TOKEN_MOMENTS not in plain


def test_scores_with_moments_are_cached_under_their_own_kind(tmp_path):
    backend = MomentScorer("m")
    cache = ResponseCache(tmp_path / "c.sqlite")
    requests = [ScoreRequest("1,2", "x,y\n"), ScoreRequest("1,2", "x,y\n"), ScoreRequest("3")]
    first = score_moments(model(backend, cache), requests, "scores")
    assert backend.calls == 2  # the repeated request is scored once
    again = score_moments(model(backend, cache), requests, "scores")
    assert backend.calls == 2 and all(r.cached for r in again)
    assert [(r.logprobs, r.means, r.sds) for r in again] == [
        (r.logprobs, r.means, r.sds) for r in first
    ]
    assert first[0].means == [t[1] for t in backend.triples("1,2")]
    assert moments_key(backend.identity, requests[0]) != score_key(backend.identity, requests[0])
    # Their log-probabilities serve the plain scores of the same texts; not the reverse.
    plain = model(backend, cache).logprobs(requests)
    assert all(r.cached for r in plain) and backend.calls == 2
    assert [r.logprobs for r in plain] == [r.logprobs for r in first]
    other = ScoreRequest("4,5", "x,y\n")
    model(backend, cache).logprobs([other])
    score_moments(model(backend, cache), [other], "scores")
    assert backend.calls == 3


def test_a_model_that_read_the_file_is_evidence():
    # A fifth of a standard deviation a token on the real rows: small row by row, plain over
    # 50 pairs. The pairs won are counted against the best data-only rule's rate on the same
    # pairs (0.6 here: the copula prefers the real row in 30 of 50), so a tenth (34 of 50
    # won, sign-flip p = 0.006 against a coin flip) is no longer enough.
    result = MinKPlusPlus().run(context(MomentScorer("tuned", ROWS, bonus=0.2), n_rows=50))
    assert result.verdict == Verdict.EVIDENCE, result.reason
    assert result.p_value < 0.01 and result.metrics["pairs_scored"] == 50
    assert result.n_hits == result.metrics["pairs_won"] > 30
    record = result.records[0]
    assert record.extra["tokens_real"] == len(record.expected)
    real = MomentScorer("tuned", ROWS, bonus=0.2).triples(record.expected)
    assert record.extra["score_real"] == pytest.approx(
        min_k_plus_plus_score(*zip(*real, strict=True), 20)
    )


class RuleKnower(MomentScorer):
    """Has read no row but knows the rule that writes nine rows of ``RULE`` in ten (z = x + y
    mod 4, which the twin misses): half a standard deviation a token more on every row that
    follows it."""

    def triples(self, text):
        lift = 0.5 if follows_rule(text) else 0.0
        return [(lp + sd * lift, mean, sd) for lp, mean, sd in super().triples(text)]


@pytest.mark.parametrize("seed", range(2))
def test_a_model_that_knows_what_the_twin_misses_but_read_no_row_gets_no_evidence(seed):
    # It prefers the real row about as often as the data-only rules of the file do: evidence
    # against a coin flip, nothing against the rules.
    result = MinKPlusPlus().run(context(RuleKnower("knows"), dataset(RULE, "rule"), seed=seed))
    assert result.verdict != Verdict.EVIDENCE, result.reason
    assert result.metrics["win_rate"] >= 0.75 and result.metrics["sign_flip_p_value"] < 0.01
    assert result.baseline == result.metrics["data_only_rate"] >= 0.75
    assert result.info["baseline_set_by"] != "chance"
    assert EXPLAINED in result.reason


@pytest.mark.parametrize("seed", range(4))
def test_a_model_that_read_nothing_is_no_evidence(seed):
    result = MinKPlusPlus().run(context(MomentScorer("base"), seed=seed))
    assert result.verdict != Verdict.EVIDENCE, result.reason
    assert result.p_value > 0.01


def test_how_sure_the_model_is_at_each_position_is_taken_out():
    # On the real rows the model is less sure at every position (lower mean, wider spread):
    # their raw log-probabilities drop well below the twin rows', their standardised scores
    # do not move. Min-K% on the raw log-probabilities would read this as the twin being more
    # familiar; Min-K%++ reads the same as for a model that is equally sure everywhere.
    flat = MomentScorer("base", ROWS, flat=1.0)
    result = MinKPlusPlus().run(context(flat))
    base = MinKPlusPlus().run(context(MomentScorer("base")))
    assert result.metrics["mean_difference"] == pytest.approx(base.metrics["mean_difference"])
    assert result.p_value == base.p_value and result.verdict != Verdict.EVIDENCE
    record = result.records[0]
    raw_real = min_k_score(flat.logprobs(record.expected), 20)
    raw_twin = min_k_score(flat.logprobs(record.extra["twin"]), 20)
    assert raw_real < raw_twin - 1


def test_a_model_without_moments_is_not_applicable_with_the_reason():
    result = run_test("min_k_plus_plus", context(PlainScorer("p")))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "no mean and spread of the log-probabilities" in result.reason
    assert "top log-probabilities only" in result.reason and not result.records


def test_a_model_without_logprobs_is_not_applicable():
    class Speaker(MomentScorer):
        logprobs = None

    result = run_test("min_k_plus_plus", context(Speaker("s")))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "gives no log-probabilities" in result.reason


def test_failed_scores_are_failed_queries_not_crashes():
    class Failing(MomentScorer):
        def logprob_moments_batch(self, items):
            raise RuntimeError("device lost")

    result = MinKPlusPlus().run(context(Failing("m"), n_rows=12))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert len(result.records) == 12
    assert all(r.error and "device lost" in r.error for r in result.records)


def test_a_dry_run_of_the_likelihood_suite_on_an_api_model_says_why_each_test_sends_nothing(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = compose_config(
        [
            "model=gpt-4o",
            "dataset=iris",
            "test=likelihood",
            f"outputs_dir={tmp_path}",
            "dry_run=true",
        ]
    )
    plan_cell(read_cell(cfg, tmp_path), tmp_path / "job", Console(file=io.StringIO()))
    notes = {
        path.stem.removeprefix("plan-"): json.loads(path.read_text())
        for path in (tmp_path / "job").glob("plan-*.json")
    }
    assert set(notes) == {
        "min_k_prob",
        "reference_ratio",
        "zlib_ratio",
        "min_k_plus_plus",
        "likelihood_inference",
    }
    for row in notes.values():
        assert row["requests"] == 0
        assert row["note"].startswith("not_applicable: model 'gpt-4o' (litellm backend) gives no")


def test_the_transformers_backend_gives_the_moments_of_its_whole_distribution(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_model import save_tiny_model

    from tabmem.llm.transformers_backend import TransformersBackend

    tiny = TransformersBackend(save_tiny_model(tmp_path), "tiny", context_window=256, device="cpu")
    try:
        items = [("a,b\n", "1,2\n"), ("", "3,4")]
        moments = tiny.logprob_moments_batch(items)
        assert TOKEN_MOMENTS in capabilities_of(tiny)
        for row, plain in zip(moments, tiny.logprobs_batch(items), strict=True):
            assert [t[0] for t in row] == pytest.approx(plain, abs=1e-5)
        ids = [1, *tiny.tokenizer("a,b\n1,2\n")["input_ids"]]  # BOS, one id per character
        with torch.no_grad():
            logits = tiny.model(input_ids=torch.tensor([ids])).logits[0].double()
        logp = torch.log_softmax(logits[4:-1], dim=-1)  # the positions that predict "1,2\n"
        mean = (logp.exp() * logp).sum(-1)
        sd = (logp.exp() * (logp - mean[:, None]) ** 2).sum(-1).sqrt()
        assert [t[1] for t in moments[0]] == pytest.approx(mean.tolist(), abs=1e-4)
        assert [t[2] for t in moments[0]] == pytest.approx(sd.tolist(), abs=1e-4)
        assert len(moments[1]) == 3  # BOS stands for the missing context: every token scored
    finally:
        tiny.close()
