"""The learner knows a table's joint distribution but never the rows it is asked about."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import sklearn.metrics

from tabmem.data import Dataset
from tabmem.data.csvtext import raw_fields
from tabmem.data.values import normalize_value
from tabmem.llm.oracle import LearnerOracle, MemorizerOracle
from tabmem.stats import neighbours
from tabmem.stats.neighbours import NeighbourModel

GROUPS = {"alpha": "pine", "beta": "oak", "gamma": "elm"}


def ledger_text(n_rows: int = 240, seed: int = 3) -> str:
    """A table with a unique code and a unique label per row (unrelated to each other), a
    group, a tree that follows the group 90 % of the time, and a size that grows with the
    group."""
    rng = random.Random(seed)
    codes = rng.sample(range(100_000, 1_000_000), n_rows)
    labels = rng.sample(range(1_000, 10_000), n_rows)
    lines = ["code,label,group,tree,size"]
    for code, label in zip(codes, labels, strict=True):
        group = rng.choice(list(GROUPS))
        tree = GROUPS[group] if rng.random() < 0.9 else rng.choice(list(GROUPS.values()))
        size = {"alpha": 10, "beta": 20, "gamma": 30}[group] + rng.randint(-3, 3)
        lines.append(f"{code},L{label},{group}, {tree},{size}.0")
    return "\n".join(lines) + "\n"


@pytest.fixture
def ledger(csv_dataset) -> Dataset:
    return csv_dataset(ledger_text())


def values(dataset: Dataset, row: int) -> list[str]:
    return [field.strip() for field in raw_fields(dataset.rows[row], ",")]


def question(dataset: Dataset, row: int, asked: str) -> str:
    names = dataset.feature_names
    shown = [f"{n} = {v}" for n, v in zip(names, values(dataset, row), strict=True) if n != asked]
    return "\n".join([*shown, f"{asked} ="])


def test_the_learner_never_answers_from_the_row_it_is_asked_about(ledger: Dataset) -> None:
    learner, memorizer = LearnerOracle([ledger]), MemorizerOracle([ledger])
    rows = range(60)
    learned = [learner.generate(question(ledger, r, "code"), 8, [], 0, chat=True) for r in rows]
    recalled = [memorizer.generate(question(ledger, r, "code"), 8, [], 0, chat=True) for r in rows]
    truth = [values(ledger, r)[0] for r in rows]
    assert sum(a == t for a, t in zip(recalled, truth, strict=True)) == 60
    assert sum(a == t for a, t in zip(learned, truth, strict=True)) == 0
    assert all(a in {values(ledger, i)[0] for i in range(len(ledger.rows))} for a in learned)


def test_conditional_answers_beat_the_marginal_mode_on_a_file_with_dependence(
    ledger: Dataset,
) -> None:
    learner = LearnerOracle([ledger])
    rows = range(len(ledger.rows))
    answers = [learner.generate(question(ledger, r, "tree"), 8, [], 0, chat=True) for r in rows]
    truth = [values(ledger, r)[3] for r in rows]
    accuracy = sum(a == t for a, t in zip(answers, truth, strict=True)) / len(truth)
    mode_rate = max(truth.count(t) for t in set(truth)) / len(truth)
    assert accuracy >= 0.85
    assert mode_rate < 0.45


def test_temperature_zero_is_greedy_and_a_higher_temperature_samples(ledger: Dataset) -> None:
    learner = LearnerOracle([ledger])
    prompt = "group = alpha\nsize ="
    greedy = {learner.generate(prompt, 8, [], seed, 0.0, chat=True) for seed in range(20)}
    sampled = {learner.generate(prompt, 8, [], seed, 1.0, chat=True) for seed in range(40)}
    assert len(greedy) == 1
    assert greedy <= sampled and len(sampled) >= 4
    assert {float(v) for v in sampled} <= {float(v) for v in range(7, 14)}


def test_csv_is_continued_in_the_files_format_without_the_asked_rows(ledger: Dataset) -> None:
    learner = LearnerOracle([ledger])
    columns = list(zip(*(raw_fields(row, ",") for row in ledger.rows), strict=True))
    for cut in (3, 10, 50):
        prompt = ledger.prefix_text(cut) + ledger.rows[cut - 1][:4]
        answer = learner.generate(prompt, 200, [], 0)
        finished, *rows = answer.split("\n")
        assert (ledger.rows[cut - 1][:4] + finished).count(",") == 4
        written = [r for r in rows[:-1] if r]
        assert len(written) >= 5
        for row in written:
            fields = raw_fields(row, ",")
            assert all(f in column for f, column in zip(fields, columns, strict=True)), row
        asked = set(ledger.rows[cut - 1 : cut + 10])
        assert not asked & set(written)


def test_multiple_choice_uses_the_dependence_but_not_the_asked_row(ledger: Dataset) -> None:
    learner, memorizer = LearnerOracle([ledger]), MemorizerOracle([ledger])
    rng = random.Random(5)
    codes = [values(ledger, r)[0] for r in range(len(ledger.rows))]
    trees = sorted(set(GROUPS.values()))
    code_hits = tree_hits = memorized = 0
    for r in range(40):
        code, label, group, tree, size = values(ledger, r)
        others = rng.sample([c for c in codes if c != code], 2)
        options = [code, *others]
        rng.shuffle(options)
        record = f"code = [hidden], label = {label}, group = {group}, tree = {tree}, size = {size}"
        text = (
            record
            + "\n"
            + "\n".join(f"{letter}) code = {v}" for letter, v in zip("ABC", options, strict=True))
        )
        right = "ABC"[options.index(code)]
        code_hits += learner.generate(text, 4, [], 0, chat=True) == right
        memorized += memorizer.generate(text, 4, [], 0, chat=True) == right
        record = f"code = {code}, label = {label}, group = {group}, tree = [hidden], size = {size}"
        text = (
            record
            + "\n"
            + "\n".join(f"{letter}) tree = {v}" for letter, v in zip("ABC", trees, strict=True))
        )
        tree_hits += learner.generate(text, 4, [], 0, chat=True) == "ABC"[trees.index(tree)]
    assert memorized == 40
    assert code_hits <= 22  # chance is 1/3: the unique code is never read off its own row
    assert tree_hits >= 32  # the tree follows the group


def test_the_neighbour_model_leaves_out_the_few_rows_that_match_everything_shown() -> None:
    rows = [["a", "1", "x"], ["a", "1", "y"], ["b", "2", "z"]] + [["c", "3", "w"]] * 20
    model = NeighbourModel(rows, k=2)
    assert model.greedy(2, {0: "a", 1: "1"}) not in {"x", "y"}
    assert model.greedy(2, {0: "c", 1: "3"}) == "w"  # 20 rows: a group, not a row
    assert model.greedy(2, {0: "a", 1: "1"}, protect=False) in {"x", "y"}
    assert normalize_value(model.greedy(1, {0: "c"})) == "3.0"


def test_each_pair_of_columns_is_weighed_once_per_process(ledger: Dataset, monkeypatch) -> None:
    """Every model of one file (each cell's learner, each of its server's threads) asks the
    same column pairs: the adjusted mutual information of a pair is computed once, and a
    second model on equal rows gets the same weights without computing any."""
    computed: list[int] = []
    real = sklearn.metrics.adjusted_mutual_info_score

    def counted(target, given):
        computed.append(1)
        return real(target, given)

    monkeypatch.setattr(sklearn.metrics, "adjusted_mutual_info_score", counted)
    monkeypatch.setattr(neighbours, "_WEIGHTS", {})
    rows = [values(ledger, i) for i in range(ledger.n_rows)]
    first = NeighbourModel(rows)
    width = len(first.columns)
    with ThreadPoolExecutor(8) as pool:  # a server's threads, all asking at once
        weighed = list(pool.map(lambda t: first._weights(t % width), range(8 * width)))
    assert len(computed) == width * width
    assert weighed[:width] == [first._weights(t) for t in range(width)]
    second = NeighbourModel([list(row) for row in rows])
    assert [second._weights(t) for t in range(width)] == weighed[:width]
    assert len(computed) == width * width  # nothing computed again
    other = NeighbourModel(rows[: len(rows) // 2])
    other._weights(0)
    assert len(computed) == width * width + width  # other rows: other pairs
