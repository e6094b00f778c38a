"""Sampling statistics pinned on hand-made tables with hand-computable values."""

import random

import numpy as np
import pandas as pd
import pytest

from tabmem.stats.correlation import compare_correlations, numeric_columns, recovery
from tabmem.stats.formats import feature_format, number_shape, text_shape
from tabmem.stats.modes import compare_modes, poisson_binomial_tail
from tabmem.stats.prefixes import PrefixIndex, greater_t_test, wilson
from tabmem.stats.samples import (
    CodedTable,
    CopyNull,
    best_matches,
    known_value_share,
    normalize_value,
    real_row_best_matches,
)

ROWS = [
    ["a", "1", "x"],
    ["a", "2", "y"],
    ["b", "1", "x"],
    ["c", "3", "z"],
]


def test_values_are_compared_by_content():
    assert normalize_value(" 5 ") == normalize_value("5.0") == "5.0"
    assert normalize_value(".28") == normalize_value("0.28")
    assert normalize_value("NaN") == normalize_value("") == ""
    assert normalize_value('"Iris-setosa"') == "Iris-setosa"


def test_best_matches_copies_and_real_rows_against_the_rest():
    table = CodedTable.from_rows(ROWS)
    samples = np.array(
        [
            table.encode(["a", "2.0", "y"]),  # a copy of row 2 (2.0 is 2)
            table.encode(["b", "3", "x"]),  # shares 2 features with row 3
            table.encode(["q", "9", "w"]),  # nothing in common
            table.encode(["b", "3", "x"]),  # drawn twice: compared once, reported twice
        ]
    )
    assert best_matches(table, samples).tolist() == [3, 2, 0, 2]
    assert best_matches(table, samples[:0]).tolist() == []
    # row 1 shares (a, x) with... row 2 shares a; row 3 shares (1, x): best 2
    assert real_row_best_matches(table, [0, 1, 2, 3]).tolist() == [2, 1, 2, 0]


def test_copy_null_counts_each_real_row_once_per_sampler():
    constant = [["a", "1"]] * 3
    null = CopyNull.fit(constant, CodedTable.from_rows(constant), 50, random.Random(0))
    # every sampler writes the one row every time: one distinct row, and one unseen row's
    # worth (n / (draws + 1)) more
    assert null.copy_chance() == 1.0
    assert null.expected(10)[1] == pytest.approx(1 + 10 / 51)
    # two rows (a,1) and (b,2): independent marginals write each with chance 1/4
    two = [["a", "1"], ["b", "2"]]
    null = CopyNull.fit(two, CodedTable.from_rows(two), 4000, random.Random(0))
    marginal = null.chances[null.samplers.index("marginal")]
    assert marginal == pytest.approx([0.25, 0.25], abs=0.02)


def iris_like(rows_per_class: int = 60) -> list[list[str]]:
    """Three classes of three coarse measurements, as iris: rows crowd each class's middle,
    and each middle is itself a real row."""
    rng = np.random.default_rng(7)
    rows = []
    for label, middle in {"p": (5.0, 3.4, 1.5), "q": (5.9, 2.8, 4.3), "r": (6.6, 3.0, 5.6)}.items():
        rows.append([*(f"{v:.1f}" for v in middle), label])
        for values in rng.normal(middle, 0.25, size=(rows_per_class - 1, 3)):
            rows.append([*(f"{v:.1f}" for v in values), label])
    return rows


def test_a_sampler_of_the_class_middles_copies_often_but_few_distinct_rows():
    rows = iris_like()
    table = CodedTable.from_rows(rows)
    null = CopyNull.fit(rows, table, 20000, random.Random(0))
    n = 200
    # the panel's zero-spread copula writes each class's median values over and over
    zero = null.chances[null.samplers.index("copula@0")]
    assert zero.sum() > 0.2
    # a model writing one real row 70 times in 200 samples copies one distinct row: no finding
    assert null.p_value(1, n) > 0.5
    # the strongest sampler of the panel spreads its draws; its expectation sets the null
    strongest, expected = null.expected(n)
    assert strongest.startswith("copula@") and strongest != "copula@0"
    assert 2 < expected < n / 4
    # many distinct rows, far above it, are a finding; a few above the mean are not
    assert null.p_value(round(expected) + 40, n) < 1e-6
    assert null.p_value(round(expected) + 1, n) > 0.05


def test_the_copy_null_is_the_panels_largest_expectation():
    rows = iris_like()
    null = CopyNull.fit(rows, CodedTable.from_rows(rows), 5000, random.Random(1))
    n = 1000
    means = [(-np.expm1(n * np.log1p(-np.minimum(q, 1 - 1e-12)))).sum() for q in null.chances]
    assert null.expected(n)[1] == pytest.approx(max(means) + n / 5001)
    assert null.p_value(0, n) == 1.0


def test_known_value_share_per_column():
    table = CodedTable.from_rows(ROWS)
    shares = known_value_share(table, {0: ["a", "b", "zz", "c"], 1: ["1.0", "7"], 2: []})
    assert shares == {0: 0.75, 1: 0.5}


def test_number_formats_need_the_file_decimals_and_style():
    ages = feature_format("age", ["41.0", "21.0", ""])
    assert ages.kind == "numeric"
    assert ages.matches("27.0") and ages.matches("")
    assert not ages.matches("7.0")  # one digit before the point: no age of the file has it
    assert not ages.matches("41") and not ages.matches("41.00") and not ages.matches("old")
    wine = feature_format("phenols", [".28", ".3", ".56"])
    assert wine.matches(".5") and not wine.matches("0.5")
    assert number_shape("-122.23") == (3, 2, False)
    assert number_shape("007") == (1, 0, False)
    assert number_shape("1e5") is None


def test_a_number_that_only_looks_plausible_is_not_in_the_files_format():
    rooms = feature_format("total_rooms", ["880.0", "7099.0", "1467.0", "12.0"])
    assert rooms.matches("1106.0") and rooms.matches("99.0")
    assert not rooms.matches("4074.1")  # every value of the file ends in .0
    assert not rooms.matches("88000.0")  # five digits before the point: never in the file
    assert not rooms.matches("7.0")  # one digit: never in the file
    prices = feature_format("value", ["452600.0", "358500.0", "14999.0"])
    assert prices.zeros == 1 and not prices.matches("452601.5")
    sepal = feature_format("sepal_length", ["4.3", "5.1", "7.9", "6"])
    assert sepal.matches("5.8") and sepal.matches("7")
    assert not sepal.matches("8.4") and not sepal.matches("3.9")  # outside the file's range
    assert sepal.describe() == "number from 4.3 to 7.9 with 0/1 decimals"


def test_categories_need_exact_spelling_and_text_needs_a_known_shape():
    species = feature_format("species", ["Iris-setosa", "Iris-virginica"])
    assert species.kind == "categorical" and not species.allows_empty
    assert species.matches("Iris-setosa")
    assert not species.matches("setosa") and not species.matches("iris-setosa")
    assert not species.matches("")
    names = feature_format("name", ["Braund, Mr. Owen", "Lee, Ms. Ann"], max_categories=1)
    assert names.kind == "text"
    assert text_shape("Smith, Mr. John") == "a, a. a"
    assert names.matches("Smith, Dr. Bo") and not names.matches("John Smith")


def test_mode_agreement_and_its_chance():
    rng = random.Random(0)
    agree = compare_modes("kind", ["a", "a", "a", "b", "c"], ["a", "b", "a"], rng)
    assert agree.agrees and agree.chance == pytest.approx(1 / 3)
    assert agree.data_modes == ("a",) and agree.n_sampled == 3
    tie = compare_modes("kind", ["a", "a", "b", "b", "c"], ["c"], rng)
    assert not tie.agrees and tie.chance == pytest.approx(2 / 3)
    assert compare_modes("kind", ["a", "b", "c"], ["a"], rng) is None  # all equally frequent
    none = compare_modes("kind", ["a", "a", "b"], [], rng)
    assert none.sample_mode is None and not none.agrees


def test_many_numbers_are_binned_and_text_is_left_out():
    data = [str(v) for v in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9.5, 9.9]]  # 12 distinct values
    binned = compare_modes("x", data, ["9.7", "9.8", "1"], random.Random(0), 5, 2)
    # two bins of width 4.95: [0, 4.95] holds 5 values, [4.95, 9.9] holds 7: the mode
    assert binned.units == "2 bins" and binned.n_units == 2
    assert binned.agrees and binned.chance == 0.5
    out = compare_modes("x", data, ["99", "99", "9"], random.Random(0), 5, 2)
    assert out.n_sampled == 1 and out.agrees  # 99 is outside the data's range
    words = [f"w{i}" for i in range(12)] + ["w0"]
    assert compare_modes("name", words, ["w0"], random.Random(0), 5, 2) is None


def test_poisson_binomial_tail_by_hand():
    assert poisson_binomial_tail([0.5, 0.5], 2) == pytest.approx(0.25)
    assert poisson_binomial_tail([0.5, 0.5], 0) == pytest.approx(1.0)
    assert poisson_binomial_tail([0.1] * 4, 2) == pytest.approx(1 - 0.9**4 - 4 * 0.1 * 0.9**3)
    assert poisson_binomial_tail([], 0) == 1.0


def _correlated(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x": x,
            "y": 2 * x + rng.normal(scale=0.3, size=n),
            "z": -x + rng.normal(scale=0.5, size=n),
        }
    )


def test_recovery_is_one_for_the_data_itself_and_zero_for_orthogonal_pairs():
    pairs = np.array([0.5, -0.4, 0.2])
    assert recovery(pairs, pairs) == pytest.approx(1.0)
    assert recovery(pairs, 0.5 * pairs) == pytest.approx(0.5)
    assert recovery(np.array([1.0, 0.0]), np.array([0.0, 0.9])) == 0.0


def test_samples_with_the_data_dependence_are_significant_and_shuffled_ones_are_not():
    data = _correlated(400, 1)
    real = data.sample(80, random_state=2).astype(str)
    same = compare_correlations(data, real, random.Random(0), permutations=199)
    assert same.recovery > 0.8 and same.matrix_correlation > 0.9
    assert same.sign_agreement == 1.0 and same.n_strong_pairs == 3
    assert same.p_value == pytest.approx(1 / 200)
    rng = np.random.default_rng(3)
    independent = pd.DataFrame({c: rng.permutation(real[c].to_numpy()) for c in real})
    shuffled = compare_correlations(data, independent, random.Random(0), permutations=199)
    assert shuffled.recovery < 0.3 and shuffled.p_value > 0.05
    assert numeric_columns(pd.DataFrame({"a": [1, 2], "b": [3, 3], "c": ["u", "v"]})) == ["a"]


def test_prefix_validity_and_the_marginal_chance():
    index = PrefixIndex(ROWS)
    assert index.is_valid(["a"], "2") and index.is_valid(["a"], "1.0")
    assert not index.is_valid(["b"], "2")
    assert not index.is_valid(["q"], "1")
    # column 2 of the data holds 1, 2, 1, 3: after "a" the values 1 and 2 are valid -> 3/4
    assert index.marginal_chance(["a"]) == pytest.approx(0.75)
    # after (a, 1) only x is valid; x is 2 of 4 values in column 3
    assert index.marginal_chance(["a", "1"]) == pytest.approx(0.5)


def test_one_sided_t_test_edge_cases_and_a_hand_computed_value():
    assert greater_t_test([1.0, 1.0, 1.0]) == 0.0
    assert greater_t_test([0.0, 0.0]) == 1.0
    assert greater_t_test([1.0]) == 1.0
    # [1, 1, 0, 0]: mean 1/2, sd sqrt(1/3), t = sqrt(3) with 3 degrees of freedom, whose
    # distribution function is 1/2 + (t / (sqrt(3) (1 + t^2 / 3)) + atan(t / sqrt(3))) / pi
    expected = 1 - (0.5 + (0.5 + np.pi / 4) / np.pi)
    assert greater_t_test([1.0, 1.0, 0.0, 0.0]) == pytest.approx(expected)


def test_wilson_interval():
    interval = wilson(5, 10)
    assert interval.rate == 0.5
    assert interval.low == pytest.approx(0.2366, abs=1e-3)
    assert interval.high == pytest.approx(0.7634, abs=1e-3)
    assert wilson(0, 0).high == 1.0
