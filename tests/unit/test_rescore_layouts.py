"""The layouts of the papers' published answers, written here from the shipped datasets with
known right and wrong answers, read back and rescored to exact counts; lines that cannot be
located are counted with their reasons."""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest
from harness import settings_of

from tabmem.battery.base import TestContext
from tabmem.battery.lifecycle import rescorable_test
from tabmem.data import dataset_specs, load_dataset
from tabmem.errors import ConfigError, DatasetError
from tabmem.prompts.observations import row_values
from tabmem.rescore import guess_format, read_transcript, rescore
from tabmem.results import Verdict


def shipped(name: str):
    return load_dataset(dataset_specs()[name])


@pytest.fixture(scope="module")
def wine():
    return shipped("wine")


@pytest.fixture(scope="module")
def titanic():
    return shipped("titanic")


@pytest.fixture(scope="module")
def iris():
    return shipped("iris")


def as_pandas(value: str) -> str:
    """A value as pandas writes a float column: ``.6`` as ``0.6``, ``25`` as ``25.0``, an empty
    cell as ``nan``, so that locating must compare values, not texts."""
    if not value:
        return "nan"
    try:
        return repr(float(value))
    except ValueError:
        return value


def run(test_name: str, dataset, lines, **changes):
    test = rescorable_test(test_name)
    params = settings_of(test_name, **{**test.settings_for(lines), **changes})
    ctx = TestContext(dataset=dataset, model=None, params=params, seed=0)
    return rescore(test, ctx, lines)


def named(dataset) -> list[str]:
    return [n.strip() for n in dataset.feature_names]


def test_one_line_feature_questions_with_the_answer_in_suffix_and_response(tmp_path, wine, iris):
    names = named(wine)
    rows = random.Random(5).sample(range(len(wine.rows)), 60)
    prefixes, suffixes, responses = [], [], []
    for i, row in enumerate(rows):
        values = dict(zip(names, row_values(wine, row), strict=True))
        truth = values.pop("malic_acid")
        prefixes.append(", ".join(f"{n} = {as_pandas(v)}" for n, v in values.items()))
        suffixes.append(f"malic_acid = {as_pandas(truth)}")
        responses.append(f"malic_acid = {truth if i < 25 else '99.99'}")
    iris_values = row_values(iris, 3)
    prefixes.append(", ".join(f"{n} = {v}" for n, v in zip(named(iris), iris_values, strict=True)))
    suffixes.append("malic_acid = 1.0")
    responses.append("malic_acid = 1.0")
    path = tmp_path / "uci-wine.csv"
    pd.DataFrame({"prefix": prefixes, "suffix": suffixes, "response": responses}).to_csv(
        path, index=False
    )
    assert guess_format(path, "feature_completion") == "published"
    lines = read_transcript(path, "published")
    result, located = run("feature_completion", wine, lines)
    assert [q.row for q, _ in located.queries] == rows
    assert (result.n_hits, result.n_queries) == (25, 60)
    assert result.info["feature"] == "malic_acid"
    not_wine = "its first 'name = value' pair does not name a feature of the file"
    assert located.missing == {not_wine: 1}
    assert result.metrics["queries_not_located"] == 1


def feature_table(dataset, rows, asked: str, right: int, extra: list[list[str]] = ()):
    names = named(dataset)
    shown = [n for n in names if n != asked]
    lines = []
    for i, row in enumerate(rows):
        values = dict(zip(names, row_values(dataset, row), strict=True))
        answer = values[asked] if i < right else "Nobody, Mr. Nemo"
        lines.append([as_pandas(values[n]) for n in shown] + [answer])
    return pd.DataFrame([*lines, *extra], columns=[*shown, asked])


def test_a_feature_table_is_located_by_its_shown_values(tmp_path, titanic):
    rows = random.Random(2).sample(range(len(titanic.rows)), 40)
    frame = feature_table(titanic, rows, "Name", right=31)
    stranger = ["99999", "1", "3", "male", "30.0", "0", "0", "X", "1.0", "nan", "S", "A, Mr. B"]
    frame.loc[len(frame)] = stranger
    path = tmp_path / "titanic-train.csv"
    frame.to_csv(path, index=False)
    assert guess_format(path, "feature_completion") == "feature-table"
    lines = read_transcript(path, "feature-table")
    assert lines[0].prefix.splitlines()[-1] == "Name ="
    result, located = run("feature_completion", titanic, lines)
    assert [q.row for q, _ in located.queries] == rows
    assert (result.n_hits, result.n_queries) == (31, 40)
    assert located.missing == {"no row of the file has the values it shows": 1}
    assert result.verdict is Verdict.EVIDENCE


def test_columns_holding_parsing_artefacts_are_left_out_when_named(tmp_path, wine):
    rows = random.Random(4).sample(range(len(wine.rows)), 30)
    frame = feature_table(wine, rows, "malic_acid", right=12)
    frame["ash"] = "25.0, magnesium = 96"
    path = tmp_path / "uci-wine.csv"
    frame.to_csv(path, index=False)
    kept = read_transcript(path, "feature-table", ignore=["ash"])
    assert "\nash =" not in kept[0].prefix and "\nalcalinity_of_ash =" in kept[0].prefix
    result, located = run("feature_completion", wine, kept)
    assert (result.n_hits, result.n_queries, len(located.missing)) == (12, 30, 0)
    with pytest.raises(Exception, match="None of the 30 lines"):
        run("feature_completion", wine, read_transcript(path, "feature-table"))
    with pytest.raises(ConfigError, match="must be shown columns"):
        read_transcript(path, "feature-table", ignore=["colour"])


def test_a_column_of_parsing_artefacts_is_named_with_the_option_that_leaves_it_out(tmp_path, wine):
    rows = random.Random(4).sample(range(len(wine.rows)), 30)
    frame = feature_table(wine, rows, "malic_acid", right=12)
    frame["ash"] = "25.0, magnesium = 96"  # a value the file's ash never takes
    path = tmp_path / "uci-wine.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(DatasetError) as refused:
        run("feature_completion", wine, read_transcript(path, "feature-table"))
    said = str(refused.value)
    assert said.startswith("None of the 30 lines of the transcript was found in wine")
    assert "column ash shows values that wine's ash never takes in 30 of 30 lines" in said.lower()
    assert "'25.0, magnesium = 96'" in said
    assert "--ignore-column ash" in said and "ignore_columns" in said
    assert "alcalinity_of_ash" not in said  # a column that holds the file's values is not named


def test_samples_count_the_exact_copies_of_real_rows(tmp_path, iris):
    names = named(iris)
    real = [row_values(iris, r) for r in range(0, 150, 10)]  # 15 copies
    made_up = [["9.9", "9.9", str(i), "0.1", "Iris-setosa"] for i in range(25)]
    frame = pd.DataFrame([[as_pandas(v) for v in r[:4]] + [r[4]] for r in real] + made_up)
    frame.columns = names
    path = tmp_path / "iris-temperature-0.7.csv"
    frame.to_csv(path, index=False)
    assert guess_format(path, "sample") == "samples"
    lines = read_transcript(path, "samples")
    result, located = run("sample", iris, lines, temperature=0.7)
    assert [q for q, _ in located.queries] == list(range(1, 41))
    assert (result.n_hits, result.n_queries) == (15, 40)
    assert result.metrics["samples_complete"] == 40
    assert result.info["temperature"] == 0.7
    assert result.verdict is Verdict.EVIDENCE


def test_conditional_completions_count_valid_next_values(tmp_path, iris):
    names = named(iris)
    rng = random.Random(7)
    lines = []
    for i in range(30):
        values = row_values(iris, rng.randrange(150))
        shown = [0, 2, 3][i % 3]
        answer = values[shown] if i < 20 else "Iris-martian"
        cells = values[:shown] + [answer] + [""] * (len(names) - shown - 1)
        lines.append([*cells, str(shown)])
    frame = pd.DataFrame(lines, columns=[*names, "num_prefix_features"])
    path = tmp_path / "iris-sepal_length-temperature-0.0.csv"
    frame.to_csv(path, index=False)
    assert guess_format(path, "conditional_completion") == "completions"
    result, located = run("conditional_completion", iris, read_transcript(path, "completions"))
    shown_none = "it shows no feature before the asked one (the test asks from the second on)"
    assert located.missing == {shown_none: 10}
    # lines 0..19 answer right; of them, those with a shown feature (i % 3 != 0) are scored
    scored_right = sum(1 for i in range(20) if i % 3)
    assert (result.n_hits, result.n_queries) == (scored_right, 20)


def test_ordered_completions_take_the_last_column_as_the_answer(tmp_path, iris):
    names = named(iris)
    rows = random.Random(8).sample(range(150), 24)
    lines = []
    for i, row in enumerate(rows):
        values = row_values(iris, row)
        lines.append([*values[:4], values[4] if i < 18 else "Iris-martian"])
    wrong_order = ["5.1", "3.5", "0.2", "1.4", "Iris-setosa"]
    frame = pd.DataFrame(lines, columns=names)
    path = tmp_path / "iris-species.csv"
    frame.to_csv(path, index=False)
    assert guess_format(path, "conditional_completion") == "ordered"
    result, located = run("conditional_completion", iris, read_transcript(path, "ordered"))
    assert (result.n_hits, result.n_queries) == (18, 24)
    assert [q.question.row for q, _ in located.queries][:1] == [
        next(r for r in range(150) if row_values(iris, r)[:4] == row_values(iris, rows[0])[:4])
    ]
    swapped = pd.DataFrame([wrong_order], columns=[*names[:2], names[3], names[2], names[4]])
    other = tmp_path / "iris-swapped.csv"
    swapped.to_csv(other, index=False)
    with pytest.raises(Exception, match="not the file's first features in order"):
        run("conditional_completion", iris, read_transcript(other, "ordered"))


def test_an_unknown_layout_is_a_one_sentence_error(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match="Unknown transcript format 'tables'"):
        read_transcript(Path(path), "tables")
