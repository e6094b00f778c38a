"""The larger table a file's rows were taken from, for the models of the data that have not
read those rows.

A file whose rows are a sample of a registered table (a lab part of adult, whose rows are in
no order; a benchmark's random split) names that table as its ``population``. (A run of rows
from a table sorted by some column is no sample of it: its twin would be drawn from the whole
table's mix.) What a model can know of the rows without having read them is then more than
the file's other rows say: the rest of the table is data too. So the twin (``tabmem.data.twin``)
and the data-only rules of the blind checks (``tabmem.stats.best_of.predictors_of``) are
fitted on the whole population, each rule asked about a file row without that row, not on the
file alone. Measured on a 50-row part of adult that the lab's model
never read: rules fitted on the part prefer its real rows to the part's twin rows in at most
0.62 of 50 pairs, the same rules fitted on adult's other rows in 0.88; the twin fitted on them
brings the best rule down to 0.46-0.62 (docs/logprob_tests.md).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from typing import TypeVar

from tabmem.data.dataset import Dataset
from tabmem.data.registry import dataset_specs, load_dataset
from tabmem.errors import ConfigError, DatasetError

Row = TypeVar("Row", bound=Sequence[str])


def population_of(dataset: Dataset) -> Dataset | None:
    """The registered dataset the file's rows were taken from, loaded (None without one)."""
    name = dataset.spec.population
    if not name:
        return None
    specs = dataset_specs()
    if name not in specs:
        raise ConfigError(
            f"Dataset '{dataset.name}' names '{name}' as its population, and no dataset config "
            f"has that name; the known ones: {', '.join(sorted(specs))}."
        )
    return load_dataset(specs[name])


def placed_rows(
    dataset: Dataset, rows_of: Callable[[Dataset], Sequence[Row]]
) -> tuple[list[Row], list[int]] | None:
    """Where the dataset names a population: the population's rows (``rows_of`` a dataset) and
    the place among them of each of the file's rows (the first equal row not already taken);
    None without one. A file row the population lacks is an error: it cannot have been taken
    from it."""
    population = population_of(dataset)
    if population is None:
        return None
    table = list(rows_of(population))
    free: dict[tuple[str, ...], deque[int]] = defaultdict(deque)
    for place, row in enumerate(table):
        free[tuple(row)].append(place)
    rows = rows_of(dataset)
    places = [free[tuple(row)].popleft() for row in rows if free[tuple(row)]]
    if len(places) < len(rows):
        raise DatasetError(
            f"{len(rows) - len(places)} of the {len(rows)} rows of '{dataset.name}' are not "
            f"rows of its population '{population.name}': a population must hold every row of "
            "the file, written as the file writes it."
        )
    return table, places
