"""A file cut from a larger registered table: its twin and data-only rules know the rest."""

from dataclasses import replace

import pytest

from tabmem.data import Dataset, dataset_specs, load_dataset
from tabmem.data.population import placed_rows
from tabmem.data.table import RawTable
from tabmem.data.transforms import apply_transform
from tabmem.data.twin import twin_of
from tabmem.errors import ConfigError, DatasetError
from tabmem.stats.best_of import predictors_of


def part_of(tmp_path, rows: slice, population: str | None = "iris", name: str = "iris-part"):
    """Rows ``rows`` of iris as a file of their own, naming ``population``."""
    iris = load_dataset(dataset_specs()["iris"])
    path = tmp_path / f"{name}.csv"
    path.write_text(iris.newline.join([iris.header, *iris.rows[rows]]) + iris.newline)
    spec = replace(iris.spec, name=name, file=None, path=str(path), population=population)
    return load_dataset(spec)


def raw(dataset: Dataset) -> list:
    return list(RawTable.from_dataset(dataset).rows)


def test_a_file_without_a_population_is_fitted_on_its_own_rows(tmp_path):
    part = part_of(tmp_path, slice(10, 30), population=None)
    assert placed_rows(part, raw) is None
    predictors = predictors_of(part)
    assert len(predictors.rows) == 20 and predictors._at(3) == 3


def test_each_file_row_is_placed_at_its_own_row_of_the_population(tmp_path):
    part = part_of(tmp_path, slice(10, 30))
    iris = load_dataset(dataset_specs()["iris"])
    table, places = placed_rows(part, raw)
    assert table == raw(iris) and places == list(range(10, 30))
    predictors = predictors_of(part)  # asked about part row i, it leaves out iris row 10 + i
    assert len(predictors.rows) == 150 and predictors._at(0) == 10
    assert predictors.boosted is predictors_of(iris).boosted  # fitted once for both
    fields = [f.strip() for f in raw(part)[4]]
    # the same question asked of iris's row 14 and of the part's row 4: the same chances
    asked = (4, dict(enumerate(fields[:4])), 4, [fields[4]])
    assert predictors.chances(*asked) == predictors_of(iris).chances(4, asked[1], 14, asked[3])


def test_a_repeated_row_takes_the_next_equal_row(tmp_path):
    iris = load_dataset(dataset_specs()["iris"])
    twice = [i for i, r in enumerate(iris.rows) if iris.rows.count(r) > 1]
    assert {101, 142} <= set(twice)  # two equal rows of iris
    part = part_of(tmp_path, slice(101, 102))
    path = part.path
    path.write_text(path.read_text() + iris.rows[101] + iris.newline)
    assert placed_rows(load_dataset(replace(part.spec)), raw)[1] == [101, 142]


def test_a_row_the_population_lacks_or_an_unknown_population_is_one_sentence(tmp_path):
    part = part_of(tmp_path, slice(0, 20))
    path = part.path
    path.write_text(path.read_text().replace(part.rows[3], "9.9,9.9,9.9,9.9,Iris-setosa"))
    changed = load_dataset(replace(part.spec))
    with pytest.raises(DatasetError, match="1 of the 20 rows of 'iris-part' are not rows of its"):
        placed_rows(changed, raw)
    with pytest.raises(ConfigError, match="names 'nope' as its population"):
        placed_rows(part_of(tmp_path, slice(0, 20), "nope", "other"), raw)


def test_the_twin_of_a_part_is_drawn_from_the_whole_table_and_names_none(tmp_path):
    part = part_of(tmp_path, slice(50, 70))
    alone = part_of(tmp_path, slice(50, 70), population=None, name="iris-alone")
    twin, twin_alone = twin_of(part, 0), twin_of(alone, 0)
    assert twin.n_rows == twin_alone.n_rows == 20
    assert twin.spec.population is None  # its rows are no table's rows
    assert twin.spec.extra["twin"]["population"] == "iris"
    assert "population" not in twin_alone.spec.extra["twin"]
    assert twin.text != twin_alone.text  # another model: one of 150 rows, not of 20
    iris_rows = set(load_dataset(dataset_specs()["iris"]).rows)
    assert not iris_rows & set(twin.rows)


def test_a_transformed_part_names_no_population(tmp_path):
    part = part_of(tmp_path, slice(0, 20))
    shuffled = apply_transform(part, {"name": "statistical"}, 0)
    assert shuffled.spec.population is None
