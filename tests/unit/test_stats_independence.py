"""The row-order check tells sorted or numbered files from shuffled ones."""

import random

import pandas as pd
import pytest

from tabmem.stats.independence import row_order_check, text_neighbours


def shuffled_frame(n=200, seed=1):
    rng = random.Random(seed)
    return pd.DataFrame(
        {"x": [rng.random() for _ in range(n)], "kind": [rng.choice("abc") for _ in range(n)]}
    )


def test_sorted_rows_are_ordered_at_the_smallest_p():
    frame = shuffled_frame().sort_values("x").reset_index(drop=True)
    order = row_order_check(frame, permutations=199, seed=0)
    assert order.ordered
    assert order.p_value == pytest.approx(1 / 200)
    assert order.ordered_columns == ["x"]
    assert order.adjacent_similarity > order.shuffled_similarity


def test_shuffled_rows_are_not_ordered():
    order = row_order_check(shuffled_frame(), permutations=199, seed=0)
    assert not order.ordered
    assert order.p_value > 0.05
    assert order.ordered_columns == []


def test_row_id_column_makes_the_file_ordered():
    frame = shuffled_frame()
    frame.insert(0, "id", range(1, len(frame) + 1))
    order = row_order_check(frame, permutations=199, seed=0)
    assert order.ordered and "id" in order.ordered_columns


def test_missing_values_are_alike_only_to_missing_values():
    frame = pd.DataFrame({"x": [1.0, None, None, 2.0]})
    order = row_order_check(frame, permutations=9, seed=0)
    # pairs: (1, nan) -> 0, (nan, nan) -> 1, (nan, 2) -> 0
    assert order.adjacent_similarity == pytest.approx(1 / 3)


def id_rows(n=120, seed=7, ordered=True):
    """Rows with a running id written as text and random values: only the text is ordered."""
    rng = random.Random(seed)
    rows = [f"P{i:03d},{rng.randint(20, 400)},{rng.choice('yn')}" for i in range(n)]
    if not ordered:
        rng.shuffle(rows)
    return rows


def test_a_running_text_id_is_seen_by_the_text_part_only():
    rows = id_rows()
    frame = pd.DataFrame([r.split(",") for r in rows], columns=["plot", "trees", "organic"])
    values = row_order_check(frame, permutations=199, seed=0)
    assert not values.ordered  # "P041" and "P042" are unequal values
    text = text_neighbours(rows, seed=0)
    assert text.gain > 0.05 and text.p_value < 0.01
    combined = values.with_text(text, alpha=0.01)
    assert combined.ordered
    assert combined.metrics()["row_order_text_p_value"] == text.p_value


def test_the_text_part_finds_nothing_in_shuffled_rows():
    text = text_neighbours(id_rows(ordered=False), seed=0)
    assert text.p_value > 0.05
    values = row_order_check(shuffled_frame(), permutations=199, seed=0)
    assert not values.with_text(text, alpha=0.01).ordered
