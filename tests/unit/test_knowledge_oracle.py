"""The reference models on the knowledge tests' prompts: name questions, header beginnings,
observation requests."""

from pathlib import Path

from tabmem.data import Dataset, DatasetSpec
from tabmem.llm.oracle import MarginalOracle, MemorizerOracle, NullOracle

TEXT = "sepal_length,sepal_width,species\n5.1,3.5,setosa\n4.9,3.0,setosa\n6.3,2.9,virginica\n"
PLANTS = Dataset(
    spec=DatasetSpec(name="plants", aliases=("Plant Measurements", "Plants")),
    path=Path("plants.csv"),
    text=TEXT,
)
UNNAMED = Dataset(spec=DatasetSpec(name="groves"), path=Path("g.csv"), text="grove,rank\nA,1\n")
QUESTION = TEXT + "What is the name of the dataset these rows come from?"


def answer(oracle, prompt: str, seed: int = 0) -> str:
    return oracle.generate(prompt, 200, (), seed, chat=True)


def test_memorizer_and_marginal_name_the_shown_dataset_by_its_first_alias():
    for oracle in (MemorizerOracle([PLANTS, UNNAMED]), MarginalOracle([PLANTS, UNNAMED])):
        assert answer(oracle, QUESTION) == "Plant Measurements"
        assert answer(oracle, "grove,rank\nA,1\nDataset name:") == "groves"


def test_null_does_not_know_the_name():
    text = answer(NullOracle([PLANTS]), QUESTION)
    assert "Plant" not in text and "plants" not in text.lower()


def test_a_question_that_does_not_ask_for_the_name_is_not_a_name_question():
    memorizer = MemorizerOracle([PLANTS])
    assert answer(memorizer, TEXT + "How many rows does this dataset have?") != "Plant Measurements"
    assert answer(memorizer, "Name the dataset") == ""  # names nothing, shows nothing


def test_header_beginnings_are_continued_by_those_who_know_the_names():
    prompt = "Dataset: Plants\nFirst line of its CSV file:\nsepal_length,"
    assert answer(MemorizerOracle([PLANTS]), prompt).startswith("sepal_width,species\n")
    assert answer(MarginalOracle([PLANTS]), prompt).startswith("sepal_width,species\n")
    assert "sepal_width" not in answer(NullOracle([PLANTS]), prompt)


def test_observation_requests_get_real_rows_or_marginal_draws():
    prompt = "Dataset: Plants\nColumns: sepal_length, sepal_width, species\nRecord:"
    rows = {
        "sepal_length = 5.1, sepal_width = 3.5, species = setosa",
        "sepal_length = 4.9, sepal_width = 3.0, species = setosa",
        "sepal_length = 6.3, sepal_width = 2.9, species = virginica",
    }
    memorizer, marginal = MemorizerOracle([PLANTS]), MarginalOracle([PLANTS])
    assert {answer(memorizer, prompt, seed) for seed in range(20)} == rows
    drawn = {answer(marginal, prompt, seed) for seed in range(60)}
    assert drawn - rows  # independent draws make rows the file does not have
    assert all(d.startswith("sepal_length = ") for d in drawn)
