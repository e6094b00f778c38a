"""Building and reading ``Feature = Value`` observations, whatever shape the model writes."""

import random
from pathlib import Path

import pytest

from tabmem.data import Dataset, DatasetSpec
from tabmem.prompts.observations import (
    dataset_title,
    format_observation,
    format_pairs,
    parse_observation,
    random_observation,
    read_value,
)

NAMES = ["Name", "Age", "Education", "EducationNum", "Income"]


def test_comma_joined_pairs_keep_commas_inside_values():
    text = "Name = Braund, Mr. Owen, Age = 22, Education = HS, EducationNum = 9, Income = <=50K"
    obs = parse_observation(text, NAMES)
    assert obs.complete
    assert obs.values == {
        "Name": "Braund, Mr. Owen",
        "Age": "22",
        "Education": "HS",
        "EducationNum": "9",
        "Income": "<=50K",
    }


def test_a_name_that_begins_another_name_is_not_confused():
    obs = parse_observation("EducationNum = 13, Education = Bachelors", NAMES)
    assert obs.values == {"EducationNum": "13", "Education": "Bachelors"}
    assert obs.missing == ("Name", "Age", "Income")
    assert obs.problem == "missing 3 feature(s): Name, Age, Income"


def test_markdown_lines_colons_quotes_and_a_lead_in_are_read():
    text = (
        "Here is a record:\n- **Name**: \"Smith, Ann\"\n- Age: 41\n* Education = 'Masters'\n"
        "EducationNum: 14\nIncome: >50K."
    )
    obs = parse_observation(text, NAMES)
    assert obs.complete
    assert obs.values["Name"] == "Smith, Ann"
    assert obs.values["Education"] == "Masters"
    assert obs.values["Income"] == ">50K"  # the final full stop is not part of the value


def test_only_the_first_observation_counts():
    text = "Age = 30, Income = <=50K\nAge = 50, Income = >50K"
    obs = parse_observation(text, NAMES)
    assert obs.values == {"Age": "30", "Income": "<=50K"}
    assert obs.repeated


def test_names_in_another_case_are_read_as_the_header_writes_them():
    obs = parse_observation("age = 30, INCOME = >50K, Age = 31", NAMES)
    assert obs.values == {"Age": "30", "Income": ">50K"} and obs.repeated


def test_empty_values_and_no_pairs():
    obs = parse_observation("Age = , Income = >50K", ["Age", "Income"])
    assert obs.values == {"Age": "", "Income": ">50K"} and obs.complete
    nothing = parse_observation("I do not know this dataset.", NAMES)
    assert not nothing.complete
    assert nothing.problem == "no feature = value pairs"


def test_format_then_parse_round_trips():
    values = ["Lee, Bo", "7", "BSc", "3", ">50K"]
    assert parse_observation(format_observation(NAMES, values), NAMES).values == dict(
        zip(NAMES, values, strict=True)
    )
    assert format_pairs(["a", "b"], ["1", "x"]) == "a = 1\nb = x"


def test_read_value_takes_one_value_from_any_answer_shape():
    names = ["a", "petal_length", "petal_width"]
    assert read_value("1.4", "petal_length", names) == "1.4"
    assert read_value("petal_length = 1.4, petal_width = 0.2", "petal_length", names) == "1.4"
    assert read_value("**petal_length**: 1.4\nmore", "petal_length", names) == "1.4"
    assert read_value(' "Iris-setosa".', "petal_length", names) == "Iris-setosa"
    assert read_value("```\n```", "petal_length", names) == ""


def test_random_observation_is_a_real_row_and_title_prefers_the_first_alias():
    text = 'x,y\n1,"a, b"\n2,c\n'
    data = Dataset(spec=DatasetSpec(name="d", aliases=("Dee",)), path=Path("d.csv"), text=text)
    assert random_observation(data, random.Random(1)) in {"x = 1, y = a, b", "x = 2, y = c"}
    assert dataset_title(data) == "Dee"
    plain = Dataset(spec=DatasetSpec(name="plain"), path=Path("p.csv"), text=text)
    assert dataset_title(plain) == "plain"


def test_a_row_read_alone_is_the_row_of_the_list(tmp_path: Path):
    text = "a,b\n1,2\n3,4\n5,6\n"
    dataset = Dataset(DatasetSpec(name="t"), tmp_path / "t.csv", text)
    assert dataset.n_rows == len(dataset.rows) == 3
    for index in range(-3, 3):
        assert dataset.row(index) == dataset.rows[index]
    for outside in (-4, 3):
        with pytest.raises(IndexError):
            dataset.row(outside)
