"""The forest learner knows a table's distribution through cross-fitted random forests, and
never the rows it is asked about."""

from __future__ import annotations

import json
import random
import re
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from test_copula_learner import columns, fields, ledger_text, question

from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.data.csvtext import raw_fields
from tabmem.llm.oracle import ORACLES, ForestOracle, LearnerOracle, MemorizerOracle
from tabmem.llm.oracle.forest import FOLDS, ForestModel
from tabmem.llm.oracle.server import OracleServer


@pytest.fixture
def ledger(csv_dataset) -> Dataset:
    return csv_dataset(ledger_text())


@pytest.fixture(scope="module")
def iris() -> Dataset:
    spec = dataset_specs().get("iris")
    if spec is None:
        pytest.skip("no iris config")
    return load_dataset(spec)


def forest_of(oracle: ForestOracle, dataset: Dataset) -> ForestModel:
    """The forest model the oracle answers ``dataset`` with."""
    table = next(t for t in oracle._tables if t.dataset is dataset)
    model = oracle._knowledge(table).model
    assert isinstance(model, ForestModel)
    return model


def test_the_forest_oracle_is_served_under_its_name() -> None:
    assert ORACLES["oracle-forest"] is ForestOracle
    assert ForestOracle.version == "1"


def test_every_prompt_kind_gets_an_answer_that_parses(ledger: Dataset) -> None:
    oracle = ForestOracle([ledger])
    names = ledger.feature_names
    values = {
        n: {f.strip().strip('"') for f in c} for n, c in zip(names, columns(ledger), strict=True)
    }
    for row in (5, 77, 150):
        assert oracle.generate(question(ledger, row, "tree"), 8, [], 0, chat=True) in values["tree"]
        assert oracle.generate(question(ledger, row, "size"), 8, [], 0, chat=True) in values["size"]
    assert oracle.generate("group = alpha\nsize =", 8, [], 0) in {" " + v for v in values["size"]}
    options = "group = [hidden], tree = pine\nA) group = alpha\nB) group = beta\nC) group = gamma"
    assert oracle.generate(options, 4, [], 0, chat=True) == "A"  # pine follows alpha
    observation = oracle.generate("An observation of the ledger dataset:", 200, [], 0, chat=True)
    pairs = dict(p.split(" = ", 1) for p in re.split(r", (?=\w+ = )", observation))
    assert list(pairs) == names
    assert all(v in values[n] for n, v in pairs.items())
    named = ledger.prefix_text(3) + "What is the name of this dataset?"
    assert oracle.generate(named, 8, [], 0, chat=True) == "ledger"
    header = oracle.generate(ledger.header[:9], 80, [], 0)
    assert header.startswith(ledger.header[9:] + "\n")


def test_csv_rows_are_written_in_the_files_format_without_the_asked_rows(
    ledger: Dataset,
) -> None:
    oracle = ForestOracle([ledger])
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
            assert len(row) == 7 and row[0] == str(cut + 1 + i)  # the counter counts on
            assert all(f in column for f, column in zip(row[1:], known[1:], strict=True)), row
        asked = {tuple(fields(ledger, r)[1:]) for r in range(cut - 1, cut + 10)}
        assert not asked & {tuple(r[1:]) for r in [first, *written]}


def test_the_fold_that_answers_never_saw_the_asked_row(ledger: Dataset) -> None:
    oracle = ForestOracle([ledger])
    model = forest_of(oracle, ledger)
    folds = Counter(model.fold_of.tolist())
    assert set(folds) == set(range(FOLDS)) and min(folds.values()) >= 40  # of 240 rows
    names = ledger.feature_names
    for row in range(0, 240, 7):
        given = {j: v.strip().strip('"') for j, v in enumerate(fields(ledger, row)) if j != 5}
        asked = model.asked(given)
        fold = model.fold(given, asked)
        assert asked == [row] and fold == model.fold_of[row]
        assert row not in model.training(fold)
        picked = model.pick(5, given)
        assert picked is not None and model.fold_of[picked] != model.fold_of[row]
    # a CSV continuation: the row the prompt stops at decides, whatever the prompt shows
    assert model.fold({0: "31"}, [30, 31, 32]) == model.fold_of[30]
    # no row identified (a group of 80 rows): a fold fixed by the shown values
    group = {names.index("group"): "alpha"}
    other = forest_of(ForestOracle([ledger]), ledger)
    assert model.asked(group) == [] and model.fold(group, []) == other.fold(group, [])


def test_identical_rows_share_a_fold(tmp_path: Path) -> None:
    text = "a,b\n" + "".join(f"{i % 7},{i % 3}\n" for i in range(60))
    model = ForestModel([line.split(",") for line in text.split()[1:]], "pairs")
    by_row: dict[str, set[int]] = {}
    for i, line in enumerate(text.split()[1:]):
        by_row.setdefault(line, set()).add(int(model.fold_of[i]))
    assert all(len(f) == 1 for f in by_row.values())
    assert len({f for fs in by_row.values() for f in fs}) == FOLDS


def test_temperature_zero_is_deterministic_and_a_draw_varies_with_the_seed(
    ledger: Dataset,
) -> None:
    oracle = ForestOracle([ledger])
    prompt = "group = alpha\nsize ="
    greedy = {oracle.generate(prompt, 8, [], seed, 0.0, chat=True) for seed in range(20)}
    sampled = [oracle.generate(prompt, 8, [], seed, 1.0, chat=True) for seed in range(40)]
    assert len(greedy) == 1 and {float(v) for v in greedy} <= {float(v) for v in range(7, 14)}
    assert len(set(sampled)) >= 4
    assert {float(v) for v in sampled} <= {float(v) for v in range(7, 14)}
    again = [ForestOracle([ledger]).generate(prompt, 8, [], s, 1.0, chat=True) for s in range(40)]
    assert again == sampled


def test_iris_feature_completion_is_a_data_only_models_and_not_the_learners(
    iris: Dataset,
) -> None:
    """Petal length (the feature the test asks on iris) from the other four values: the forest
    hits about as often as the other data-only models, far below the memorizer, and writes
    answers of its own."""
    forest, learner, memorizer = (
        ForestOracle([iris]),
        LearnerOracle([iris]),
        MemorizerOracle([iris]),
    )
    model = forest_of(forest, iris)
    prompts = [question(iris, r, "petal_length") for r in range(150)]
    truth = [fields(iris, r)[2] for r in range(150)]
    answers = [forest.generate(p, 8, [], 0, chat=True) for p in prompts]
    learned = [learner.generate(p, 8, [], 0, chat=True) for p in prompts]
    recalled = [memorizer.generate(p, 8, [], 0, chat=True) for p in prompts]
    hits = sum(a == t for a, t in zip(answers, truth, strict=True))
    learner_hits = sum(a == t for a, t in zip(learned, truth, strict=True))
    assert sum(a == t for a, t in zip(recalled, truth, strict=True)) >= 145  # twins differ
    assert learner_hits - 10 <= hits <= 45  # data-only: 0.09 to 0.3, never near 1
    assert sum(a == b for a, b in zip(answers, learned, strict=True)) <= 90
    assert np.mean([abs(float(a) - float(t)) for a, t in zip(answers, truth, strict=True)]) < 0.5
    for r in range(0, 150, 10):
        given = {j: v for j, v in enumerate(fields(iris, r)) if j != 2}
        picked = model.pick(2, given)
        assert picked is not None and model.fold_of[picked] != model.fold_of[r]


def test_a_value_the_others_predict_is_not_read_off_the_asked_row(tmp_path: Path) -> None:
    """``twice`` is 2 × ``base`` + 1 in every row, each value unique: a forest on the other
    rows predicts a neighbouring value, never the asked row's own."""
    rng = random.Random(11)
    bases = rng.sample(range(1_000, 9_000), 200)
    text = "base,twice,colour\n" + "".join(
        f"{b},{2 * b + 1},{rng.choice(['red', 'blue'])}\n" for b in bases
    )
    path = tmp_path / "pairs.csv"
    path.write_text(text)
    pairs = Dataset(spec=DatasetSpec(name="pairs", file=path.name), path=path, text=text)
    oracle = ForestOracle([pairs])
    answers = [oracle.generate(question(pairs, r, "twice"), 8, [], 0, chat=True) for r in range(60)]
    truth = [fields(pairs, r)[1] for r in range(60)]
    gaps = [abs(int(a) - int(t)) for a, t in zip(answers, truth, strict=True)]
    assert min(gaps) > 0
    assert np.median(gaps) <= 400  # of a span of 16 000: the dependence is learnt


def test_the_forest_oracle_answers_over_http(ledger: Dataset) -> None:
    with OracleServer([ledger]) as server:
        with urllib.request.urlopen(server.base_url + "/models", timeout=10) as response:
            assert "oracle-forest" in [m["id"] for m in json.loads(response.read())["data"]]
        prompt = ledger.prefix_text(12)
        body = {"model": "oracle-forest", "prompt": prompt, "max_tokens": 40, "temperature": 0}
        request = urllib.request.Request(
            server.base_url + "/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            reply = json.loads(response.read())
    text = reply["choices"][0]["text"]
    assert reply["model"] == "oracle-forest"
    assert text == ForestOracle([ledger]).generate(prompt, 40, [], 0)
    first = raw_fields(text.split("\n")[0], ",")
    assert len(first) == 7 and first[0] == "12" and first[1:] != fields(ledger, 11)[1:]


def test_oracles_of_one_process_share_a_files_forests(ledger: Dataset, csv_dataset) -> None:
    # a power job's forest rests (one per share) and the next seed's ask the same forests
    from tabmem.llm.oracle.partial import PartialOracle, Recall

    first = forest_of(ForestOracle([ledger]), ledger)
    assert forest_of(ForestOracle([ledger]), ledger) is first
    rest = PartialOracle([ledger], Recall(0.1, 0, "random", "forest")).rest
    assert forest_of(rest, ledger) is first
    other = csv_dataset(ledger_text().replace("\n", "\n", 1) + ledger_text().split("\n", 1)[1])
    assert forest_of(ForestOracle([other]), other) is not first  # another text, other forests
