"""min_k_prob and row_order on hand-made files, with scripted models that can or cannot score."""

import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from harness import settings_of

from tabmem.battery import min_k_prob
from tabmem.battery.base import TestContext, run_test
from tabmem.battery.min_k_prob import MinKProb, file_order, row_pairs
from tabmem.battery.row_order import RowOrderTest, shuffled_orders
from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.data.csvtext import raw_fields
from tabmem.llm.base import LOGPROBS
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.logprobs import ScoreRequest
from tabmem.results import Verdict
from tabmem.stats.blind_check import EXPLAINED
from tabmem.stats.contrast import ContrastTable
from tabmem.stats.independence import row_order_check

# Values scattered by a multiplicative hash: no column is sorted, so rows are exchangeable.
TEXT = "x,y,label\n" + "".join(
    f"{i * 37 % 101}.{i * 7 % 10},{i * 53 % 97},k{i % 3}\n" for i in range(1, 41)
)
# A file that runs by place, like california-housing: ten regions of 100 rows each, a place
# value near its region's, and two columns drawn at random, which say nothing of the place.
_draw = random.Random(0)
PLACES = "place,size,price\n" + "".join(
    f"{10 * (i // 100) + _draw.random():.2f},{_draw.random():.2f},{_draw.random():.2f}\n"
    for i in range(1000)
)
SORTED = "id,value\n" + "".join(f"{i},{i * 13 % 17}\n" for i in range(1, 41))

# A census-like file whose formats a model can know without the rows: a row counter, income
# always written with ".0", a sparse count (mostly 0), hours heaped at 40, and an education
# code that the education's name determines.
EDUCATION = {"HS-grad": "9", "Bachelors": "13", "Masters": "14", "Doctorate": "16"}


def _census_row(i: int) -> str:
    education = list(EDUCATION)[(i * 7 % 11) % 4]
    gain = str(1000 + i * 13 % 500) if i % 7 == 0 else "0"
    hours = str(20 + i * 11 % 40) if i % 3 == 0 else "40"
    label = ">50K" if (i * 29 % 13) > 8 else "<=50K"
    return (
        f"{i},{20 + i * 37 % 50}, {education},{EDUCATION[education]},"
        f"{1000 + (i * 53 % 97) * 31}.0,{gain},{hours}, {label}\n"
    )


CENSUS = "id,age,education,education_num,income,gain,hours,label\n" + "".join(
    _census_row(i) for i in range(1, 201)
)


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


class RowMemorizer(ScoringBackend):
    """Knows every row of the file as a line, whatever comes before it."""

    def logprobs(self, text, context=""):
        self.calls += 1
        known = f"\n{text}\n" in self.file_text
        return [-0.1 if known else -2.0] * len(text)


class DistributionKnower(ScoringBackend):
    """Knows how the file's columns are written and distributed, none of its rows: one token
    per field, the log of the value's share of its column as written (a value never written
    so, a format break, gets half a count), and a token for whether the education code goes
    with the education's name."""

    def __init__(self, file_text):
        super().__init__(file_text, memorizer=False)
        lines = file_text.splitlines()
        fields = [line.split(",") for line in lines[1:]]
        self.columns = [Counter(c) for c in zip(*fields, strict=True)]
        self.n = len(lines) - 1
        self.pairs = {(f[2], f[3]) for f in fields}

    def logprobs(self, text, context=""):
        self.calls += 1
        fields = text.split(",")
        shares = [max(c[v], 0.5) / self.n for c, v in zip(self.columns, fields, strict=True)]
        pair = 1.0 if (fields[2], fields[3]) in self.pairs else 0.5 / self.n
        return [math.log(s) for s in [*shares, pair]]


class ContextCopier(ScoringBackend):
    """Has read no row but copies the context: a field is as likely as it is near the mean of
    its column in the rows before it (one token per field)."""

    def __init__(self, file_text):
        super().__init__(file_text, memorizer=False)

    def logprobs(self, text, context=""):
        self.calls += 1
        before = [line.split(",") for line in context.splitlines()[1:]]
        means = [sum(float(r[j]) for r in before) / len(before) for j in range(3)]
        return [-abs(float(v) - m) for v, m in zip(text.split(","), means, strict=True)]


class NoScoreBackend(ScoringBackend):
    logprobs = None


def table_of(data):
    return ContrastTable(data.rows, data.delimiter, len(data.feature_names))


def model(backend, cache=None):
    return LanguageModel(backend, "m", prompt_form="completion", cache=cache, show_progress=False)


def context(test, backend, data=None, seed=0, **params):
    return TestContext(data or dataset(), model(backend), settings_of(test, **params), seed)


def census_columns():
    rows = [r.split(",") for r in dataset(CENSUS, "census").rows]
    return [Counter(c) for c in zip(*rows, strict=True)]


def test_contrast_rows_take_every_value_as_its_column_writes_it():
    data = dataset(CENSUS, "census")
    sample = row_pairs(data, table_of(data), 60, 0, 0.5, 5, np.random.default_rng(0))
    columns = census_columns()
    file_pairs = {(r.split(",")[2], r.split(",")[3]) for r in data.rows}
    assert len(sample.pairs) == 60
    for pair in sample.pairs:
        fields = pair.contrast.split(",")
        assert pair.contrast != pair.real
        assert all(v in column for v, column in zip(fields, columns, strict=True))
        assert fields[0] == pair.real.split(",")[0]  # the row counter never moves
        assert (fields[2], fields[3]) in file_pairs  # education and its code move together
        assert pair.replaced and "id" not in pair.replaced


def test_quoted_and_missing_fields_are_taken_whole_from_their_column():
    text = "id,name,age,fare\n" + "".join(
        f'{i},"Name{i % 9}, Mr. X",{"" if i % 4 == 0 else 20 + i % 30},{i * 7 % 50}.25\n'
        for i in range(1, 61)
    )
    data = dataset(text, "quoted")
    columns = [set(c) for c in zip(*(raw_fields(r, ",") for r in data.rows), strict=True)]
    sample = row_pairs(data, table_of(data), 20, 0, 0.5, 5, np.random.default_rng(0))
    assert len(sample.pairs) == 20
    for pair in sample.pairs:
        fields = raw_fields(pair.contrast, ",")
        assert all(v in column for v, column in zip(fields, columns, strict=True))


def test_contrast_columns_move_in_blocks_and_counters_stay():
    table = ContrastTable(dataset(CENSUS, "census").rows, ",", 8)
    assert table.ordered == (0,)
    assert (2, 3) in table.blocks
    assert all(0 not in block for block in table.blocks)


def test_a_donor_with_the_same_values_drops_the_pair_instead_of_redrawing():
    # `gain` is mostly 0: redrawing until the donor differs would pair real zeros with rare
    # contrasts (about 4 real zeros for each contrast zero; a model that likes zeros would
    # win); dropping the pair keeps the two sides alike.
    text = "a,gain\n" + "".join(f"{i * 7 % 13},{0 if i % 5 else 100 + i}\n" for i in range(400))
    moved, zeros_real, zeros_contrast, dropped = 0, 0, 0, 0
    for seed in range(4):
        data = dataset(text, "sparse")
        sample = row_pairs(data, table_of(data), 100, 0, 0.5, 5, np.random.default_rng(seed))
        gain = [p for p in sample.pairs if "gain" in p.replaced]
        moved += len(gain)
        zeros_real += sum(p.real.endswith(",0") for p in gain)
        zeros_contrast += sum(p.contrast.endswith(",0") for p in gain)
        dropped += sample.dropped
    assert dropped > 0 and moved > 60
    assert abs(zeros_real - zeros_contrast) <= 0.25 * moved


def test_min_k_prob_memorizer_is_evidence():
    result = MinKProb().run(context("min_k_prob", RowMemorizer(TEXT), n_rows=20))
    assert result.verdict == Verdict.EVIDENCE, result.reason
    assert result.metrics["win_rate"] == 1.0
    assert result.n_hits == result.n_queries == 20
    assert result.p_value == pytest.approx(0.5**20)
    assert result.baseline == 0.5


def test_min_k_prob_a_model_no_better_than_a_data_only_rule_gets_no_evidence(monkeypatch):
    # Pairs whose real row a data-only rule prefers nine times in ten, and a model that
    # prefers it in the same pairs: p < 1e-8 against a coin flip, nothing against the rule,
    # and the reason says that the file alone explains it.
    data = dataset(CENSUS, "census")
    liked = {row for i, row in enumerate(data.rows) if i % 10}

    class Picky(ScoringBackend):
        def logprobs(self, text, context=""):
            return [-0.1 if text in liked else -2.0 if text in data.rows else -1.0] * len(text)

    def rule(dataset, pairs, statistic=None):
        return {
            row: {"nearest neighbours": float(real in liked), "chance": 0.5}
            for row, real, _ in pairs
        }

    monkeypatch.setattr(min_k_prob, "pair_chances", rule)
    result = MinKProb().run(context("min_k_prob", Picky(CENSUS), data, n_rows=50))
    assert result.metrics["pairs_tied"] == 0 and result.metrics["win_rate"] >= 0.8
    assert result.baseline == pytest.approx(result.metrics["win_rate"])
    assert result.info["baseline_set_by"] == "nearest neighbours"
    assert result.verdict == Verdict.NO_EVIDENCE, result.reason
    assert EXPLAINED in result.reason and result.metrics["distribution_explains"] == 1.0


def test_min_k_prob_a_model_that_knows_formats_and_distribution_gets_no_evidence():
    # The old contrasts (last digit moved) broke formats: `4074.0` -> `4074.1`, `0` -> `1`,
    # education codes that no education has; this scorer found every one of them. It ties
    # most pairs (about 40 of 50), so the share won is judged over five seeds together.
    won = lost = 0
    for seed in range(5):
        backend = DistributionKnower(CENSUS)
        result = MinKProb().run(
            context("min_k_prob", backend, dataset(CENSUS, "census"), seed=seed, n_rows=50)
        )
        assert result.verdict != Verdict.EVIDENCE, result.reason
        assert result.metrics["pairs_scored"] == 50
        assert result.p_value > 0.01
        won, lost = won + result.metrics["pairs_won"], lost + result.metrics["pairs_lost"]
    assert won + lost >= 30
    assert won / (won + lost) < 0.6


def test_min_k_prob_the_distribution_knower_finds_format_breaks():
    # The same scorer is not blind: a contrast with one broken format is always found.
    backend = DistributionKnower(CENSUS)
    real = dataset(CENSUS, "census").rows[3]
    broken = real.replace(".0,", ".1,")
    score = model(backend).logprobs([ScoreRequest(real), ScoreRequest(broken)])
    assert min(score[0].logprobs) > min(score[1].logprobs)


def test_row_counters_do_not_put_a_file_in_order_but_places_do():
    draw = random.Random(0)
    text = "id,a,b\n" + "".join(
        f"{i},{draw.randint(0, 99)},{draw.random():.3f}\n" for i in range(300)
    )
    counted, places = dataset(text, "counted"), dataset(PLACES, "places")
    assert row_order_check(counted.frame).ordered  # the row counter alone
    assert not file_order(counted, table_of(counted), 199, 0.01, 0).shows_order
    assert file_order(places, table_of(places), 199, 0.01, 0).shows_order


@pytest.mark.parametrize("seed", range(3))
def test_min_k_prob_a_model_that_copies_the_context_gets_no_evidence_on_a_file_in_order(seed):
    # California-housing runs by place, so the five rows before a row tell where it is: with
    # donors from anywhere in the file, a contrast's place is often far from its context's
    # and a model that only copies the context picks the real row (both base models did: 22
    # of 25 pairs). Donors from the same stretch of the file take that away.
    # (Each pair with its own copy of the five rows before it: in passes over the file, donors
    # never come from the rows before a row, which its context may hold.)
    data = dataset(PLACES, "places")
    whole_file = MinKProb().run(
        context(
            "min_k_prob",
            ContextCopier(PLACES),
            data,
            seed,
            n_rows=50,
            donor_window=1000,
            window_tokens=0,
        )
    )
    nearby = MinKProb().run(context("min_k_prob", ContextCopier(PLACES), data, seed, n_rows=50))
    assert whole_file.verdict == Verdict.EVIDENCE, whole_file.reason
    assert nearby.metrics["donors_nearby"] == 1.0
    assert nearby.verdict != Verdict.EVIDENCE, nearby.reason
    assert nearby.metrics["win_rate"] < 0.65


def test_min_k_prob_donors_nearby_still_find_a_memorizer():
    data = dataset(PLACES, "places")
    result = MinKProb().run(context("min_k_prob", RowMemorizer(PLACES), data, n_rows=30))
    assert result.metrics["donors_nearby"] == 1.0
    assert result.verdict == Verdict.EVIDENCE, result.reason
    # the baseline is the best data-only rule's rate of preferring the real row on these pairs
    rules = [v for k, v in result.metrics.items() if k.startswith("baseline_")]
    assert result.baseline == pytest.approx(max(rules)) and result.baseline >= 0.5
    assert result.info["baseline_set_by"] in result.reason
    assert all(abs(r.extra["donor_row"] - r.extra["row"]) <= 10 for r in result.records)
    assert all(not 0 <= r.extra["row"] - r.extra["donor_row"] <= 5 for r in result.records)


def test_min_k_prob_without_logprobs_is_not_applicable_before_it_runs():
    ctx = context("min_k_prob", NoScoreBackend(TEXT))
    assert LOGPROBS not in ctx.model.capabilities
    result = run_test("min_k_prob", ctx)
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "gives no log-probabilities" in result.reason
    assert result.n_queries == 0 and ctx.model.stats.model_calls == 0


def test_min_k_prob_failed_scores_are_failed_queries_not_crashes():
    class Failing(ScoringBackend):
        def logprobs(self, text, context=""):
            raise RuntimeError("device lost")

    result = MinKProb().run(context("min_k_prob", Failing(TEXT), n_rows=12))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert all(r.error and "device lost" in r.error for r in result.records)


def test_min_k_prob_without_a_varying_column_is_not_applicable():
    text = "a,b\n" + "".join(f"x,{i}\n" for i in range(30))  # one column varies: no contrast
    result = MinKProb().run(context("min_k_prob", RowMemorizer(text), dataset(text, "flat")))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "got a contrast row" in result.reason


def test_row_order_memorizer_beats_every_shuffle():
    backend = ScoringBackend(TEXT)
    result = RowOrderTest().run(context("row_order", backend, n_rows=12, n_permutations=199))
    assert result.verdict == Verdict.EVIDENCE, result.reason
    assert result.n_hits == 199
    assert result.p_value == pytest.approx(1 / 200)


def test_row_order_without_memory_is_no_evidence():
    result = RowOrderTest().run(
        context("row_order", ScoringBackend(TEXT, memorizer=False), n_rows=12)
    )
    assert result.verdict == Verdict.NO_EVIDENCE
    assert result.p_value == 1.0  # every shuffle ties with the file order


def test_row_order_on_sorted_rows_is_not_applicable_before_any_query():
    backend = ScoringBackend(SORTED)
    result = RowOrderTest().run(context("row_order", backend, dataset(SORTED, "sorted"), n_rows=20))
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "not in random order" in result.reason and "ordered columns: id" in result.reason
    assert backend.calls == 0


def test_row_order_on_iris_is_not_applicable_the_file_is_grouped_by_species():
    """Iris's first 24 rows pass a 5 % test of order (Bonferroni p about 0.1), but the file
    is sorted by species and its first rows are smoother than most shuffles: not a test of
    memory there."""
    iris = load_dataset(dataset_specs()["iris"])
    backend = ScoringBackend(iris.text, memorizer=False)
    result = RowOrderTest().run(context("row_order", backend, iris, structure_shuffles=1999))
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
    result = RowOrderTest().run(context("row_order", backend, dataset(text, "grouped"), n_rows=20))
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
    result = RowOrderTest().run(context("row_order", backend, dataset(text, "drift"), n_rows=24))
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
