"""The reference models on multiple-choice prompts: the memorizer recognises real rows, the
marginal model prefers frequent values, the null model answers any letter."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tabmem.data import Dataset, DatasetSpec
from tabmem.llm.oracle import MarginalOracle, MemorizerOracle, NullOracle
from tabmem.llm.oracle.models import choice_options

TEXT = (
    "id,colour,size\n"
    + "".join(
        f"{i},{c},{s}\n" for i, c, s in [(11, "red", 1.5), (12, "red", 2.5), (13, "red", 3.5)]
    )
    + "".join(f"{i},{c},{s}\n" for i, c, s in [(14, "blue", 4.5), (15, "green", 5.5)])
)
BOXES = Dataset(spec=DatasetSpec(name="boxes"), path=Path("boxes.csv"), text=TEXT)

COMPLETION = (
    "A row of the boxes dataset, one value hidden:\n"
    "id = 14, colour = [hidden], size = 4.5\n\n"
    "Which value of colour does this row have?\n"
    "A) colour = red\nB) colour = blue\nC) colour = green"
)
EXISTENCE = (
    "Exactly one of these rows is a row of the boxes dataset.\n"
    "A) id = 11, colour = red, size = 3.5\n"
    "B) id = 11, colour = red, size = 1.5\n"
    "C) id = 11, colour = red, size = 4.5\n\n"
    "Which row is in the dataset?"
)


def test_options_are_lettered_lines_in_order_from_a() -> None:
    assert choice_options(COMPLETION) == [
        ("A", "colour = red"),
        ("B", "colour = blue"),
        ("C", "colour = green"),
    ]
    assert choice_options("B) one\nC) two") == []
    assert choice_options("A) only one") == []
    assert choice_options("id = 14\nsize =") == []


def test_the_memorizer_picks_the_option_that_completes_a_real_row() -> None:
    oracle = MemorizerOracle([BOXES])
    for seed in range(5):
        assert oracle.generate(COMPLETION, 4, [], seed, chat=True) == "B"
        assert oracle.generate(EXISTENCE, 4, [], seed, chat=True) == "B"
    assert oracle.generate(COMPLETION + "\nAnswer:", 4, ["\n"], 0) == " B"


def test_the_marginal_model_picks_the_most_frequent_value() -> None:
    oracle = MarginalOracle([BOXES])
    assert {oracle.generate(COMPLETION, 4, [], s, chat=True) for s in range(5)} == {"A"}


def test_without_a_known_dataset_every_oracle_answers_a_letter_at_random() -> None:
    unknown = COMPLETION.replace("colour", "F2").replace("size", "F3").replace("id", "F1")
    for oracle in (MemorizerOracle([BOXES]), MarginalOracle([BOXES]), NullOracle([BOXES])):
        letters = Counter(oracle.generate(unknown, 4, [], s, chat=True) for s in range(60))
        assert set(letters) == {"A", "B", "C"}
        assert oracle.generate(unknown, 4, [], 7, chat=True) in "ABC"


def test_the_null_model_ignores_what_it_cannot_know() -> None:
    letters = Counter(
        NullOracle([BOXES]).generate(EXISTENCE, 4, [], s, chat=True) for s in range(60)
    )
    assert set(letters) == {"A", "B", "C"}


def test_a_prompt_without_options_is_answered_as_before() -> None:
    oracle = MemorizerOracle([BOXES])
    assert oracle.generate("id = 14, colour = blue, size =", 4, [], 0) == " 4.5"
