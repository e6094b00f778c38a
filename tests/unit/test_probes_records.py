"""The probes' records: values from the file, donor candidates, altered copies."""

from __future__ import annotations

import random
from pathlib import Path

from tabmem.data import Dataset, DatasetSpec
from tabmem.prompts.probe_records import (
    ValueTable,
    altered_copies,
    candidates,
    distinct_values,
    donors,
    hidden_attributes,
)

TEXT = (
    'id,name,size,kind\n1,"Lee, Ann", 2.5,a\n2,Bo,3.5,b\n3,Cy,,a\n'
    "4,Di,4.5,c\n5,Ed,5.5,d\n6,Fay,6.5,e\n"
)
DATASET = Dataset(spec=DatasetSpec(name="tiny"), path=Path("tiny.csv"), text=TEXT)
TABLE = ValueTable.from_dataset(DATASET)


def test_values_are_unquoted_and_stripped() -> None:
    assert TABLE.names == ("id", "name", "size", "kind")
    assert TABLE.rows[0] == ("1", "Lee, Ann", "2.5", "a")
    assert TABLE.rows[2] == ("3", "Cy", "", "a")
    assert TABLE.counts[3]["a"] == 2
    assert TABLE.text(TABLE.rows[1], hidden=[2], mask="[hidden]") == (
        "id = 2, name = Bo, size = [hidden], kind = b"
    )


def test_donors_are_other_rows_without_repeats() -> None:
    for seed in range(20):
        drawn = donors(TABLE, 3, 4, random.Random(seed))
        assert len(set(drawn)) == 4 and TABLE.rows[3] not in drawn


def test_distinct_values_needs_non_empty_and_different() -> None:
    assert distinct_values(["1", "2", "3"])
    assert not distinct_values(["1", "2", "1"])
    assert not distinct_values(["1", "", "3"])


def test_hidden_attributes_skip_empty_values_and_keep_file_order() -> None:
    for seed in range(10):
        assert hidden_attributes(TABLE.rows[2], [2, 1, 0], 2, random.Random(seed)) == [0, 1]


def test_candidates_start_with_the_true_value_and_are_distinct_or_dropped() -> None:
    kept = dropped = 0
    for seed in range(40):
        values = candidates(TABLE, 0, 3, 4, random.Random(seed))
        if values is None:
            dropped += 1
            continue
        kept += 1
        assert values[0] == "a" and len(set(values)) == 5
        assert set(values) <= set(TABLE.columns[3])
    # "a" is held by rows 1 and 3: drawing row 3 among the 4 donors of 5 rows drops the draw
    assert kept and dropped


def test_altered_copies_differ_from_the_record_exactly_on_the_attributes() -> None:
    seen = 0
    for seed in range(40):
        copies = altered_copies(TABLE, 1, [0, 1], 4, random.Random(seed))
        if copies is None:
            continue
        seen += 1
        for copy in copies:
            assert copy[2:] == TABLE.rows[1][2:]
            assert copy[0] != "2" and copy[1] != "Bo" and copy not in TABLE.row_set
        assert len({c[0] for c in copies}) == 4
    assert seen == 40  # ids and names never repeat


def test_altered_copies_are_dropped_when_an_attribute_repeats_a_value() -> None:
    # kind: a, b, a, c, d, e -- any draw with row 3 (kind a) repeats the record's "a"
    results = [altered_copies(TABLE, 0, [3], 4, random.Random(s)) for s in range(40)]
    assert any(r is None for r in results) and any(r is not None for r in results)
