"""Format-keeping perturbation of single numbers and identifier replacement, by hand."""

import numpy as np
import pytest

from tabmem.data.perturb import NumberText, decimals, perturb_number, replace_identifiers


def rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize(
    ("text", "whole", "fraction", "units"),
    [
        ("5.1", "5", "1", 51),
        (".28", "", "28", 28),
        (" 40", "40", "", 40),
        ("-122.23", "122", "23", 12223),
    ],
)
def test_number_text_parts(text, whole, fraction, units):
    number = NumberText.parse(text)
    assert (number.whole, number.fraction, number.units) == (whole, fraction, units)


@pytest.mark.parametrize("text", ["", "abc", "1e5", "1,000", "?"])
def test_non_numbers_are_not_parsed_and_stay_unchanged(text):
    assert NumberText.parse(text) is None
    assert perturb_number(text, 0.01, rng()) == text


@pytest.mark.parametrize("text", ["0", "0.0", ".00", " 0"])
def test_zero_stays_zero(text):
    assert perturb_number(text, 0.01, rng()) == text


def test_one_percent_of_a_large_integer_moves_it_by_about_one_percent():
    # 1 % of 77516 is 775; the draw is 0.5 to 1.5 of it, so the move is 387 to 1163.
    for seed in range(20):
        moved = int(perturb_number("77516", 0.01, rng(seed)))
        assert 387 <= abs(moved - 77516) <= 1163


def test_a_single_digit_moves_by_one_and_never_leaves_its_format():
    assert {perturb_number("9", 0.01, rng(s)) for s in range(20)} == {"8"}
    assert {perturb_number("1", 0.01, rng(s)) for s in range(20)} == {"2"}
    assert {perturb_number("5", 0.01, rng(s)) for s in range(20)} == {"4", "6"}


def test_format_is_kept_at_the_edges():
    assert {perturb_number("10", 0.01, rng(s)) for s in range(20)} == {"11"}  # not "09"
    assert {perturb_number("99", 0.01, rng(s)) for s in range(20)} == {"98"}  # not "100"
    assert all(perturb_number(".28", 0.01, rng(s)) in {".27", ".29"} for s in range(20))
    assert all(perturb_number("0.995", 0.01, rng(s)).startswith("0.9") for s in range(20))
    assert all(perturb_number(" 40", 0.01, rng(s)) in {" 39", " 41"} for s in range(20))
    assert all(perturb_number("-7.5", 0.01, rng(s)) in {"-7.4", "-7.6"} for s in range(20))


def test_a_value_with_fewer_decimals_than_its_column_gains_them():
    # iris writes 3.0 as "3": one unit of "3" would be a 33 % change, so it becomes 2.9 or 3.1.
    assert {perturb_number("3", 0.01, rng(s), max_decimals=1) for s in range(20)} == {"2.9", "3.1"}
    assert perturb_number("3", 0.01, rng(), max_decimals=0) in {"2", "4"}
    assert decimals("3.25") == 2 and decimals("3") == 0 and decimals("x") == 0


def test_identifiers_are_replaced_consistently_by_values_not_in_the_data():
    values = ["1", "2", "3", "2", "", "A/5 21171", "Braund, Mr. Owen Harris"]
    new = replace_identifiers(values, rng())
    assert new[1] == new[3] and new[4] == ""
    assert not set(new) & (set(values) - {""})
    assert len({v for v in new if v}) == 5
    assert new[6].split()[1] == "Mr." and new[6].count(",") == 1  # title and shape kept
    assert new[5][1] == "/" and new[5][:1].isalpha() and new[5][-5:].isdigit()


def test_dense_numeric_ids_get_more_digits_when_their_width_is_full():
    values = [str(i) for i in range(1, 10)]
    new = replace_identifiers(values, rng())
    assert all(len(v) == 2 for v in new) and not set(new) & set(values)
