"""The copula learner knows a table's distribution through its copulas, never the asked rows.

The tests of what every learner owes (formats kept, no asked row written, the dependence
followed) run on the forest learner too."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.data.copula_conditional import CopulaConditionals
from tabmem.data.csvtext import raw_fields
from tabmem.llm.oracle import ORACLES, CopulaOracle, ForestOracle, Oracle

GROUPS = {"alpha": "pine", "beta": "oak", "gamma": "elm"}


def ledger_text(n_rows: int = 240, seed: int = 3) -> str:
    """A counter, a unique code and label per row, a group, a tree that follows the group, a
    size that grows with the group (written with one decimal) and a quoted, padded note."""
    rng = random.Random(seed)
    codes = rng.sample(range(100_000, 1_000_000), n_rows)
    labels = rng.sample(range(1_000, 10_000), n_rows)
    lines = ["id,code,label,group,tree,size,note"]
    for i, (code, label) in enumerate(zip(codes, labels, strict=True)):
        group = rng.choice(list(GROUPS))
        tree = GROUPS[group] if rng.random() < 0.9 else rng.choice(list(GROUPS.values()))
        size = {"alpha": 10, "beta": 20, "gamma": 30}[group] + rng.randint(-3, 3)
        note = rng.choice(['"dry, warm"', '"wet, cold"', "mild"])
        lines.append(f"{i + 1},{code},L{label},{group}, {tree},{size}.0,{note}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def ledger(csv_dataset) -> Dataset:
    return csv_dataset(ledger_text())


@pytest.fixture(scope="module")
def iris() -> Dataset:
    spec = dataset_specs().get("iris")
    if spec is None:
        pytest.skip("no iris config")
    return load_dataset(spec)


def fields(dataset: Dataset, row: int) -> list[str]:
    return raw_fields(dataset.rows[row], dataset.delimiter)


def question(dataset: Dataset, row: int, asked: str) -> str:
    names = dataset.feature_names
    shown = [
        f"{n} = {v.strip().strip(chr(34))}"
        for n, v in zip(names, fields(dataset, row), strict=True)
        if n != asked
    ]
    return "\n".join([*shown, f"{asked} ="])


def columns(dataset: Dataset) -> list[set[str]]:
    rows = [raw_fields(r, dataset.delimiter) for r in dataset.rows]
    return [set(c) for c in zip(*rows, strict=True)]


def test_the_copula_oracle_is_served_under_its_name() -> None:
    assert ORACLES["oracle-copula"] is CopulaOracle
    assert CopulaOracle.version


def test_every_prompt_kind_gets_an_answer_that_parses(ledger: Dataset) -> None:
    oracle = CopulaOracle([ledger])
    names = ledger.feature_names
    values = {
        n: {f.strip().strip('"') for f in c} for n, c in zip(names, columns(ledger), strict=True)
    }
    answer = oracle.generate(question(ledger, 5, "tree"), 8, [], 0, chat=True)
    assert answer in values["tree"]
    options = "group = [hidden], tree = pine\nA) group = alpha\nB) group = beta\nC) group = gamma"
    assert oracle.generate(options, 4, [], 0, chat=True) in {"A", "B", "C"}
    observation = oracle.generate("An observation of the ledger dataset:", 200, [], 0, chat=True)
    pairs = dict(p.split(" = ", 1) for p in re.split(r", (?=\w+ = )", observation))
    assert list(pairs) == names
    assert all(v in values[n] for n, v in pairs.items())
    named = ledger.prefix_text(3) + "What is the name of this dataset?"
    assert oracle.generate(named, 8, [], 0, chat=True) == "ledger"
    header = oracle.generate(ledger.header[:9], 80, [], 0)
    assert header.startswith(ledger.header[9:] + "\n")


def test_csv_rows_are_written_in_the_files_format(ledger: Dataset) -> None:
    oracle = CopulaOracle([ledger])
    known = columns(ledger)
    for cut, typed in ((3, 4), (10, 9), (60, 0)):
        start = ledger.rows[cut - 1][:typed]
        prompt = ledger.prefix_text(cut) + start
        finished, *rows = oracle.generate(prompt, 150, [], 0).split("\n")
        first = raw_fields(start + finished, ",")
        assert len(first) == 7 and first[0] == str(cut)
        written = [raw_fields(r, ",") for r in rows[:-1] if r]
        assert len(written) >= 4
        for i, row in enumerate(written):
            assert len(row) == 7 and row[0] == str(cut + 1 + i)
            assert all(f in column for f, column in zip(row[1:], known[1:], strict=True)), row
        asked = {tuple(fields(ledger, r)[1:]) for r in range(cut - 1, cut + 10)}
        assert not asked & {tuple(r[1:]) for r in written}


@pytest.mark.parametrize("learner", [CopulaOracle, ForestOracle])  # both learners
def test_a_field_cut_short_is_finished_from_its_typed_beginning(
    learner: type[Oracle], ledger: Dataset
) -> None:
    oracle = learner([ledger])
    row = fields(ledger, 19)
    typed = ",".join(row[:5]) + ",2"
    finished = oracle.generate(ledger.prefix_text(19) + typed, 60, [], 0).split("\n")[0]
    size = raw_fields(typed + finished, ",")[5]
    assert size.startswith("2") and size.endswith(".0") and size in columns(ledger)[5]


@pytest.mark.parametrize("learner", [CopulaOracle, ForestOracle])  # both learners
def test_a_value_only_the_asked_row_holds_is_never_the_answer(
    learner: type[Oracle], ledger: Dataset
) -> None:
    oracle = learner([ledger])
    for asked, column in (("code", 1), ("label", 2)):
        truth = [fields(ledger, r)[column] for r in range(40)]
        greedy = [
            oracle.generate(question(ledger, r, asked), 8, [], 0, chat=True) for r in range(40)
        ]
        drawn = [
            oracle.generate(question(ledger, r, asked), 8, [], s, 1.0, chat=True)
            for r in range(40)
            for s in range(3)
        ]
        assert all(g != t for g, t in zip(greedy, truth, strict=True))
        assert all(d != truth[i // 3] for i, d in enumerate(drawn))
        assert set(greedy) | set(drawn) <= columns(ledger)[column]


def test_temperature_zero_is_deterministic_and_a_draw_varies_with_the_seed(
    ledger: Dataset,
) -> None:
    oracle = CopulaOracle([ledger])
    prompt = "group = alpha\nsize ="
    greedy = {oracle.generate(prompt, 8, [], seed, 0.0, chat=True) for seed in range(20)}
    sampled = [oracle.generate(prompt, 8, [], seed, 1.0, chat=True) for seed in range(40)]
    sizes = Counter(
        fields(ledger, r)[5] for r in range(len(ledger.rows)) if "alpha" in ledger.rows[r]
    )
    assert greedy == {sizes.most_common(1)[0][0]}  # the most probable size of the group
    assert len(set(sampled)) >= 4
    assert {float(v) for v in sampled} <= {float(v) for v in range(7, 14)}
    again = [oracle.generate(prompt, 8, [], seed, 1.0, chat=True) for seed in range(40)]
    assert again == sampled


@pytest.mark.parametrize("learner", [CopulaOracle, ForestOracle])  # both learners
def test_feature_answers_follow_the_dependence(learner: type[Oracle], ledger: Dataset) -> None:
    oracle = learner([ledger])
    rows = range(len(ledger.rows))
    answers = [oracle.generate(question(ledger, r, "tree"), 8, [], 0, chat=True) for r in rows]
    truth = [fields(ledger, r)[4].strip() for r in rows]
    accuracy = sum(a == t for a, t in zip(answers, truth, strict=True)) / len(truth)
    assert accuracy >= 0.85


@pytest.mark.parametrize("learner", [CopulaOracle, ForestOracle])  # both learners
def test_multiple_choice_prefers_a_consistent_iris_record_over_a_patched_one(
    learner: type[Oracle],
    iris: Dataset,
) -> None:
    oracle = learner([iris])
    names = iris.feature_names
    species = sorted({fields(iris, r)[4] for r in range(len(iris.rows))})
    hits = 0
    for r in range(0, 150, 5):
        row = fields(iris, r)
        patched = [*row[:4], next(s for s in species if s != row[4])]
        records = [row, patched] if r % 2 else [patched, row]
        text = "Which record is real?\n" + "\n".join(
            f"{letter}) " + ", ".join(f"{n} = {v}" for n, v in zip(names, rec, strict=True))
            for letter, rec in zip("AB", records, strict=True)
        )
        hits += oracle.generate(text, 4, [], 0, chat=True) == ("A" if r % 2 else "B")
    assert hits >= 27  # of 30: species follows petal length


def test_the_conditional_model_is_the_twins_copula_and_leaves_rows_out(ledger: Dataset) -> None:
    rows = [raw_fields(r, ",") for r in ledger.rows]
    model = CopulaConditionals(rows)
    for view, copula in zip(model.evidence({}).views, model.table.copulas, strict=True):
        assert np.allclose(view.correlation, copula.correlation)
    assert model.counters == {0: 1}
    asked = model.asked({2: rows[7][2]})
    assert asked == {7}
    probabilities = model.probabilities(1, model.evidence({3: rows[7][3]}, asked), asked)
    assert probabilities[model.codes[7, 1]] == 0
    assert probabilities.sum() == pytest.approx(1.0)


def test_a_value_the_others_predict_is_not_read_off_the_asked_row(tmp_path: Path) -> None:
    """``twice`` is 2 × ``base`` + 1 in every row, each value unique: the copula's latent
    scores correlate fully, so only leaving the asked row out keeps its value from coming back."""
    rng = random.Random(11)
    bases = rng.sample(range(1_000, 9_000), 200)
    text = "base,twice,colour\n" + "".join(
        f"{b},{2 * b + 1},{rng.choice(['red', 'blue'])}\n" for b in bases
    )
    path = tmp_path / "pairs.csv"
    path.write_text(text)
    pairs = Dataset(spec=DatasetSpec(name="pairs", file=path.name), path=path, text=text)
    oracle = CopulaOracle([pairs])
    answers = [oracle.generate(question(pairs, r, "twice"), 8, [], 0, chat=True) for r in range(60)]
    truth = [fields(pairs, r)[1] for r in range(60)]
    close = [abs(int(a) - int(t)) <= 2 * 60 for a, t in zip(answers, truth, strict=True)]
    assert not any(a == t for a, t in zip(answers, truth, strict=True))
    assert sum(close) >= 50  # a neighbouring value: the dependence is learnt, the row is not


def test_one_slices_mass_is_the_arrays_to_the_bit() -> None:
    from tabmem.data.copula_conditional import _interval, _interval_of

    rng = np.random.default_rng(0)
    edges = np.sort(rng.normal(scale=4, size=(500, 2)), axis=1)
    edges[:20, 0] = -np.inf  # a column's first slice
    edges[20:40, 1] = np.inf  # and its last
    expected = _interval(edges[:, 0], edges[:, 1])
    assert [_interval_of(float(a), float(b)) for a, b in edges] == expected.tolist()
