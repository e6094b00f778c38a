"""Which row or value of a completion is scored, and how a first token is read."""

import pytest

from tabmem.data import load_dataset
from tabmem.stats.answers import feature_answer, first_csv_row, row_matches, values_match
from tabmem.stats.scoring import levenshtein_similarity
from tabmem.stats.tokens import first_token, rule_first_token
from tabmem.stats.uniqueness import (
    _parsed_columns,
    is_row_id,
    most_unique_feature,
    text_columns,
    unique_fraction,
)

HEADER = "a,b,c,d"


def test_first_row_skips_a_lead_in_a_fence_and_the_header():
    text = "Sure, here it is:\n```csv\na,b,c,d\n5.1,3.5,1.4,x\n6,6,6,y\n```"
    assert first_csv_row(text, HEADER, ",") == "5.1,3.5,1.4,x"


def test_first_row_is_scored_not_a_later_one():
    text = "9,9,9,z\n5.1,3.5,1.4,x\n"
    assert first_csv_row(text, HEADER, ",") == "9,9,9,z"
    assert not row_matches(first_csv_row(text, HEADER, ","), "5.1,3.5,1.4,x")


def test_first_row_falls_back_to_the_first_line_and_to_empty():
    assert first_csv_row("no idea\n", HEADER, ",") == "no idea"
    assert first_csv_row("\n```\n", HEADER, ",") == ""


def test_row_match_ignores_only_trailing_whitespace():
    assert row_matches("1,2 \r", "1,2")
    assert not row_matches(" 1,2", "1,2")


def test_levenshtein_similarity_of_one_substitution():
    # distance 1 over 11 characters
    assert levenshtein_similarity("5.1,3.5,1.4", "5.1,3.6,1.4") == pytest.approx(1 - 1 / 11)
    assert levenshtein_similarity("", "abc") == 0.0


def test_feature_answer_drops_a_repeated_question_and_quotes():
    assert feature_answer(' Name = "Braund, Mr. Owen"\nmore', "Name") == "Braund, Mr. Owen"
    assert feature_answer("```\n0.627\n```", "x") == "0.627"
    assert feature_answer("", "x") == ""


def test_values_match_as_text_or_number():
    assert values_match(".28", "0.28")
    assert values_match("abc", "abc")
    assert not values_match("0.281", "0.28")
    assert not values_match("abc", "abd")


@pytest.mark.parametrize(
    ("row", "token"),
    [
        ("5.1,3.5", "5"),
        ("39, State-gov", "39"),
        ("-122.23,37.88", "-122"),
        ("12345,1", "123"),
        ("State-gov,1", "State"),
        ('"Braund, Mr",1', '"'),
    ],
)
def test_rule_first_token(row, token):
    assert rule_first_token(row, digits=3) == token


def test_first_token_uses_the_tokenizer_when_there_is_one():
    assert first_token("39,x", lambda text: None) == "39"
    assert first_token("39,x", lambda text: ["", "3", "9"]) == "3"
    assert first_token("", list) == ""


def test_row_ids_and_the_most_unique_feature():
    assert is_row_id(["1", "2", "3"])
    assert is_row_id(["9", "5", "1"])
    assert not is_row_id(["1", "3", "2"])
    assert not is_row_id(["1", "1", "2"])
    assert not is_row_id(["a", "b"])
    columns = {
        "id": ["1", "2", "3", "4"],
        "n": ["1", "2", "3", "4"],
        "name": ["ab", "cd", "ef", "gh"],
    }
    # id and n are both row ids; nothing else is left but name
    assert most_unique_feature(columns).name == "name"
    tie = {"num": ["7", "2", "9", "4"], "name": ["ab", "cd", "ef", "gh"]}
    assert most_unique_feature(tie).name == "name"  # equal fractions: longer values win
    assert unique_fraction(["a", "a", "b", "c"]) == 0.75


def test_text_columns_are_parsed_once_and_handed_out_as_fresh_lists(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a, b\n1, x\n2,y\n")
    dataset = load_dataset({"name": "t", "path": str(path)})
    first = text_columns(dataset)
    assert first == {"a": ["1", "2"], "b": ["x", "y"]}
    first["a"].append("3")
    before = _parsed_columns.cache_info().hits
    assert text_columns(dataset) == {"a": ["1", "2"], "b": ["x", "y"]}
    assert _parsed_columns.cache_info().hits == before + 1
