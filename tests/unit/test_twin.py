"""Twins keep their file's formats and dependence, hold no real row, and are seeded."""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from pathlib import Path

import pytest

from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.data.table import RawTable
from tabmem.data.transforms import apply_transform
from tabmem.data.values import normalize_value
from tabmem.errors import DatasetError

SHIPPED = [
    "iris",
    "wine",
    "titanic",
    "openml-diabetes",
    "adult",
    "california-housing",
    "icu",
    "scikit-diabetes",
    "synthetic-novel",
]


@functools.cache
def real(name: str) -> Dataset:
    return load_dataset(dataset_specs()[name])


@functools.cache
def twin(name: str, seed: int = 0) -> Dataset:
    return apply_transform(real(name), {"name": "twin"}, seed)


@pytest.mark.parametrize("name", SHIPPED)
def test_twin_keeps_the_files_formats_and_holds_no_real_row(name: str) -> None:
    original, copy = real(name), twin(name)
    assert copy.header == original.header
    assert copy.newline == original.newline
    assert copy.text.endswith(copy.newline) == original.text.endswith(original.newline)
    assert len(copy.rows) == len(original.rows)
    raw_real, raw_twin = RawTable.from_dataset(original), RawTable.from_dataset(copy)
    counters = set(copy.spec.extra["twin"]["counter_columns"])
    modelled = [j for j in range(len(raw_real.header)) if j not in counters]
    for j in modelled:
        spellings = set(raw_real.column(j))
        assert set(raw_twin.column(j)) <= spellings, f"column {j} has a value the file never writes"

    def key(row: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(normalize_value(row[j]) for j in modelled)

    real_rows = {key(row) for row in raw_real.rows}
    assert not [row for row in raw_twin.rows if key(row) in real_rows]
    assert copy.text != original.text


def test_twin_keeps_counters_quoting_and_missing_markers_of_titanic() -> None:
    copy = twin("titanic")
    ids = [int(row.split(",", 1)[0]) for row in copy.rows]
    assert ids == list(range(1, len(copy.rows) + 1))
    assert copy.frame["Age"].isna().mean() == pytest.approx(
        real("titanic").frame["Age"].isna().mean(), abs=0.05
    )
    assert all(row.count('"') % 2 == 0 for row in copy.rows)
    assert sum('"' in row for row in copy.rows) > 0.5 * len(copy.rows)


def test_twin_keeps_the_marginals_and_the_dependence_between_columns() -> None:
    original, copy = real("iris").frame, twin("iris").frame
    for species in original["species"].unique():
        real_mean = original.loc[original.species == species, "petal_length"].mean()
        twin_mean = copy.loc[copy.species == species, "petal_length"].mean()
        assert twin_mean == pytest.approx(real_mean, abs=0.25), species
    adult_real, adult_twin = real("adult").frame, twin("adult").frame
    share = Counter(adult_twin["Income"])[">50K"] / len(adult_twin)
    assert share == pytest.approx(Counter(adult_real["Income"])[">50K"] / len(adult_real), abs=0.02)
    husbands = adult_twin[adult_twin.Relationship == "Husband"]
    assert (husbands.Gender == "Male").mean() > 0.95


def test_twin_is_deterministic_for_a_seed_and_recorded() -> None:
    first, again = twin("wine", 0), apply_transform(real("wine"), {"name": "twin"}, 0)
    other = twin("wine", 1)
    assert first.text == again.text
    assert other.text != first.text
    record = first.spec.extra["twin"]
    assert record["sha256"] == hashlib.sha256(first.text.encode()).hexdigest()
    assert record["source_sha256"] == hashlib.sha256(real("wine").text.encode()).hexdigest()
    assert record["hub_column"] == 0  # the cultivar tells most about the others
    assert first.name == "wine" and first.spec.extra["transform"] == "twin"


def test_a_table_too_small_for_new_rows_is_a_clear_error(tmp_path: Path) -> None:
    text = "kind\nx\nx\ny\ny\n"
    dataset = Dataset(spec=DatasetSpec(name="tiny"), path=tmp_path / "tiny.csv", text=text)
    with pytest.raises(DatasetError, match="differ from every real row"):
        apply_transform(dataset, {"name": "twin"}, 0)
