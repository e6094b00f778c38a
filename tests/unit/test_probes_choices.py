"""Multiple-choice prompts: the option block, the request forms, and reading answers back."""

from __future__ import annotations

import pytest

from tabmem.llm.base import GenerationParams
from tabmem.prompts.choices import (
    UNPARSEABLE,
    Option,
    choice_request,
    option_block,
    parse_choice,
)

VALUES = ["3.5", "3.0", "2.9", "3.55", "4.1"]
OPTIONS = [Option(f"sepal_width = {v}", v) for v in VALUES]
RECORDS = [
    Option("age = 39, job = clerk, hours = 40"),
    Option("age = 50, job = manager, hours = 13"),
    Option("age = 38, job = cleaner, hours = 40"),
]


def test_option_block_letters_each_option_on_its_own_line() -> None:
    assert option_block(RECORDS) == (
        "A) age = 39, job = clerk, hours = 40\n"
        "B) age = 50, job = manager, hours = 13\n"
        "C) age = 38, job = cleaner, hours = 40"
    )


@pytest.mark.parametrize(
    ("answer", "index", "rule"),
    [
        ("B", 1, "letter"),
        (" (c) ", None, UNPARSEABLE),  # lower case is not a letter answer and names no option
        ("(C)", 2, "letter"),
        ("**D.**", 3, "letter"),
        ("```\nE\n```", 4, "letter"),
        ("A) sepal_width = 3.5", 0, "letter"),
        ("B - because it fits", 1, "letter"),
        ("C\nThe others are too wide.", 2, "letter"),
        ("The answer is D.", 3, "named_letter"),
        ("Answer: (E)", 4, "named_letter"),
        ("I would pick option B here", 1, "named_letter"),
        ('The row with "Iris-setosa" is row D.', 3, "named_letter"),
        ("The row with the most data is the first.", None, UNPARSEABLE),
        ("sepal_width = 2.9", 2, "option_text"),
        ("3.55", 3, "value"),
        ("4.10", 4, "value"),  # numbers compared as numbers
        ("The width is 3.0 cm.", 1, "value"),
        ("F", None, UNPARSEABLE),  # a letter that is not an option
        ("3.5 or 3.0", None, UNPARSEABLE),  # names two options
        ("I do not know.", None, UNPARSEABLE),
        ("The answer is A real row.", None, UNPARSEABLE),  # the article, not the letter
        ("", None, UNPARSEABLE),
    ],
)
def test_answers_are_read_by_the_first_rule_that_applies(answer, index, rule) -> None:
    choice = parse_choice(answer, OPTIONS)
    assert (choice.index, choice.rule) == (index, rule)


def test_a_whole_record_written_back_is_read_as_its_option() -> None:
    answer = "The real row is:\nage = 50,  job = Manager, hours = 13"
    choice = parse_choice(answer, RECORDS)
    assert (choice.index, choice.rule) == (1, "option_text")


def test_a_sentence_starting_with_the_article_a_is_not_the_letter_a() -> None:
    choice = parse_choice("A row like the third one: age = 38, job = cleaner, hours = 40", RECORDS)
    assert (choice.index, choice.rule) == (2, "option_text")


def test_chat_and_completion_requests_hold_the_same_question() -> None:
    params = GenerationParams(max_tokens=8)
    chat = choice_request("Pick one.", "Q?\nA) x\nB) y", True, "Answer:", params)
    assert [m["role"] for m in chat.messages] == ["system", "user"]
    assert chat.messages[1]["content"] == "Q?\nA) x\nB) y"
    plain = choice_request("Pick one.", "Q?\nA) x\nB) y", False, "Answer:", params)
    assert plain.prompt == "Pick one.\n\nQ?\nA) x\nB) y\nAnswer:"
    bare = choice_request("", "Q?", False, "Answer:", params)
    assert bare.prompt == "Q?\nAnswer:"
