"""min_k_prob and row_order on hand-made files, with scripted models that can or cannot score."""

import random
from pathlib import Path

import numpy as np
import pytest

from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.logprobs import ScoreRequest
from tabmem.results import Verdict
from tabmem.tests.base import TestContext
from tabmem.tests.min_k_prob import nudge_number, perturb_row, row_pairs, run_min_k_prob
from tabmem.tests.row_order import run_row_order, shuffled_orders

# Values scattered by a multiplicative hash: no column is sorted, so rows are exchangeable.
TEXT = "x,y,label\n" + "".join(
    f"{i * 37 % 101}.{i * 7 % 10},{i * 53 % 97},k{i % 3}\n" for i in range(1, 41)
)
SORTED = "id,value\n" + "".join(f"{i},{i * 13 % 17}\n" for i in range(1, 41))


def dataset(text=TEXT, name="toy"):
    return Dataset(spec=DatasetSpec(name=name, family=name), path=Path("toy.csv"), text=text)


class ScoringBackend:
    """One token per character; a memorizer finds likely what follows the context's last line
    in the file."""

    def __init__(self, file_text, memorizer=True):
        self.file_text = file_text
        self.memorizer = memorizer
        self.identity = {"provider": "test", "model": f"scorer-{memorizer}"}
        self.calls = 0

    def logprobs(self, text, context=""):
        self.calls += 1
        last_line = context.split("\n")[-2] + "\n" if context else ""
        known = self.memorizer and (last_line + text) in self.file_text
        return [-0.1 if known else -2.0] * len(text)

    def chat(self, messages, params):
        return ""

    def complete(self, prompt, params):
        return ""

    def count_tokens(self, text):
        return len(text)

    def tokenize(self, text):
        return list(text)

    def close(self):
        pass


class NoScoreBackend(ScoringBackend):
    logprobs = None


def model(backend, cache=None):
    return LanguageModel(backend, "m", prompt_form="completion", cache=cache, show_progress=False)


def context(backend, data=None, **params):
    return TestContext(data or dataset(), model(backend), {"n_permutations": 199, **params}, 0)


def test_nudge_number_keeps_the_format_and_moves_one_unit():
    rng = random.Random(0)
    assert nudge_number("5.1", rng) in {"5.0", "5.2"}
    assert nudge_number("0", rng) == "1"
    assert nudge_number("9", rng) == "8"
    assert nudge_number("10", rng) == "11"
    assert nudge_number(".28", rng) in {".27", ".29"}
    assert nudge_number("k1", rng) is None


def test_perturbed_rows_differ_only_in_numbers_and_are_never_real_rows():
    pairs = row_pairs(dataset(), 15, 1, 0.5, random.Random(0))
    rows = set(dataset().rows)
    assert len(pairs) == 15
    for pair in pairs:
        assert pair.perturbed not in rows
        assert pair.real.split(",")[2] == pair.perturbed.split(",")[2]
        assert pair.context.startswith("x,y,label\n")
        assert pair.context.endswith("\n")
    assert perturb_row("a,b", ",", 0.5, random.Random(0)) is None


def test_min_k_prob_memorizer_is_evidence():
    result = run_min_k_prob(context(ScoringBackend(TEXT), n_rows=20))
    assert result.verdict == Verdict.EVIDENCE, result.reason
    assert result.metrics["auc"] == 1.0
    assert result.n_hits == result.n_queries == 20
    assert result.p_value < 0.01
    assert result.baseline == 0.5


def test_min_k_prob_without_memory_is_no_evidence():
    result = run_min_k_prob(context(ScoringBackend(TEXT, memorizer=False), n_rows=20))
    assert result.verdict == Verdict.NO_EVIDENCE
    assert result.metrics["auc"] == 0.5
    assert result.p_value == 1.0


def test_min_k_prob_without_logprobs_is_not_applicable():
    result = run_min_k_prob(context(NoScoreBackend(TEXT)))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "gives no log-probabilities" in result.reason


def test_min_k_prob_failed_scores_are_failed_queries_not_crashes():
    class Failing(ScoringBackend):
        def logprobs(self, text, context=""):
            raise RuntimeError("device lost")

    result = run_min_k_prob(context(Failing(TEXT), n_rows=12))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert all(r.error and "device lost" in r.error for r in result.records)


def test_row_order_memorizer_beats_every_shuffle():
    result = run_row_order(context(ScoringBackend(TEXT), n_rows=12))
    assert result.verdict == Verdict.EVIDENCE, result.reason
    assert result.n_hits == 199
    assert result.p_value == pytest.approx(1 / 200)


def test_row_order_without_memory_is_no_evidence():
    result = run_row_order(context(ScoringBackend(TEXT, memorizer=False), n_rows=12))
    assert result.verdict == Verdict.NO_EVIDENCE
    assert result.p_value == 1.0  # every shuffle ties with the file order


def test_row_order_on_sorted_rows_is_not_applicable_before_any_query():
    backend = ScoringBackend(SORTED)
    result = run_row_order(context(backend, dataset(SORTED, "sorted"), n_rows=20))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "not in random order" in result.reason and "ordered columns: id" in result.reason
    assert backend.calls == 0


def test_row_order_on_iris_is_not_applicable_the_file_is_grouped_by_species():
    """Iris's first 24 rows pass a 5 % test of order (Bonferroni p about 0.1), but the file
    is sorted by species and its first rows are smoother than most shuffles: not a test of
    memory there."""
    iris = load_dataset(dataset_specs()["iris"])
    backend = ScoringBackend(iris.text, memorizer=False)
    result = run_row_order(context(backend, iris, structure_shuffles=1999))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "not in random order" in result.reason and "species" in result.reason
    assert 0.05 < result.metrics["structure_p_value"] < 0.5  # passed the old gate
    assert result.metrics["file_order_p_value"] < 0.05
    assert backend.calls == 0


def test_row_order_sees_an_order_that_only_the_whole_file_shows():
    # 200 rows grouped by kind: the first 20 are all "a", random in u and v, so they look
    # exchangeable on their own (every column's p-value high); the file as a whole is not.
    rng = np.random.default_rng(1)
    text = "u,v,kind\n" + "".join(
        f"{rng.integers(0, 1000)},{rng.integers(0, 1000)},{'ab'[i >= 100]}\n" for i in range(200)
    )
    backend = ScoringBackend(text, memorizer=False)
    result = run_row_order(context(backend, dataset(text, "grouped"), n_rows=20))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert result.metrics["structure_p_value"] == 1.0
    assert "ordered columns: kind" in result.reason
    assert backend.calls == 0


def test_row_order_refuses_a_weak_order_of_the_first_rows_that_no_5_percent_test_rejects():
    # u drifts upwards over the first 24 rows under noise; the rest of the file is random.
    rng = np.random.default_rng(3)
    text = "u,v,w\n" + "".join(
        f"{(i / 24 + rng.normal(0, 0.4)) if i < 24 else rng.normal(0.5, 0.5):.3f},"
        f"{rng.integers(0, 1000)},{rng.integers(0, 1000)}\n"
        for i in range(200)
    )
    backend = ScoringBackend(text, memorizer=False)
    result = run_row_order(context(backend, dataset(text, "drift"), n_rows=24))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert 0.05 < result.metrics["structure_p_value"] <= 0.5
    assert result.metrics["file_order_p_value"] > 0.05
    assert "column 'u'" in result.reason
    assert backend.calls == 0


def test_shuffled_orders_are_seeded_and_never_the_identity():
    orders = shuffled_orders(5, 50, random.Random(3))
    assert orders == shuffled_orders(5, 50, random.Random(3))
    assert all(o != list(range(5)) and sorted(o) == list(range(5)) for o in orders)


def test_scores_are_cached_under_their_own_kind(tmp_path):
    backend = ScoringBackend(TEXT)
    cache = ResponseCache(tmp_path / "c.sqlite")
    requests = [ScoreRequest("1,2", "x,y\n"), ScoreRequest("1,2", "x,y\n"), ScoreRequest("3")]
    first = model(backend, cache).logprobs(requests)
    assert backend.calls == 2  # the repeated request is scored once
    again = model(backend, cache).logprobs(requests)
    assert backend.calls == 2
    assert [r.logprobs for r in again] == [r.logprobs for r in first]
    assert all(r.cached for r in again)
    assert model(NoScoreBackend(TEXT)).logprobs(requests) is None


def test_quoted_fields_are_kept_exactly_and_only_unquoted_numbers_move():
    row = '1,"Braund, Mr. Owen",22,"7"'
    perturbed = perturb_row(row, ",", 1.0, random.Random(0))
    assert perturbed.count('"Braund, Mr. Owen"') == 1
    assert perturbed.endswith(',"7"')
    assert perturbed.split(",")[0] in {"0", "2"}
    assert perturbed.split(",")[-2] in {"21", "23"}
