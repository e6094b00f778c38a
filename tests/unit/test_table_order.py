"""The order the tables list tests in comes from each test's class (``table_order``), not from a
list kept apart: a test that declares none comes after the papers' tests, by claim and name."""

from __future__ import annotations

import pytest

from tabmem.battery import base
from tabmem.battery.base import UNORDERED, claiming, claiming_in_order, registry
from tabmem.battery.lifecycle import Lifecycle

PAPERS = [
    "header",
    "row_completion",
    "feature_completion",
    "first_token",
    "conditional_completion",
    "completion_choice",
    "existence",
    "sample",
    "min_k_prob",
    "row_order",
    "feature_names",
    "dataset_name",
    "feature_values",
    "feature_distribution",
    "conditional_distribution",
]


def _classes() -> dict[str, type[Lifecycle]]:
    return {name: type(test.__self__) for name, test in registry().items()}


def test_the_tables_list_the_papers_tests_in_the_papers_order_first():
    listed = claiming_in_order("rows_seen", "knowledge")
    assert listed[: len(PAPERS)] == PAPERS
    rest = listed[len(PAPERS) :]
    assert rest == [t for t in claiming("rows_seen") if t in rest] + [
        t for t in claiming("knowledge") if t in rest
    ]


def test_the_order_is_each_class_s_own_declaration():
    classes = _classes()
    declared = sorted(
        (cls.table_order, name) for name, cls in classes.items() if cls.table_order != UNORDERED
    )
    assert [name for _, name in declared] == PAPERS
    assert len({order for order, _ in declared}) == len(declared)  # no two share a place


def test_a_class_s_table_order_moves_its_test(monkeypatch):
    last_of_rows_seen = claiming_in_order("rows_seen")[-1]
    monkeypatch.setitem(base._TABLE_ORDER, last_of_rows_seen, 0)
    assert claiming_in_order("rows_seen")[0] == last_of_rows_seen
    monkeypatch.setitem(base._TABLE_ORDER, "header", UNORDERED + 1)
    assert claiming_in_order("rows_seen")[-1] == "header"


@pytest.mark.parametrize("name", PAPERS)
def test_the_registry_keeps_what_the_class_declares(name):
    assert base._TABLE_ORDER[name] == _classes()[name].table_order
