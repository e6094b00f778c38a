"""Twins keep their file's formats and dependence, hold no real row, and are seeded."""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from pathlib import Path

import numpy as np
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
    renumbered = set(copy.spec.extra["twin"]["new_numbers"])
    modelled = [j for j in range(len(raw_real.header)) if j not in counters]
    for j in modelled:
        spellings = set(raw_real.column(j))
        if j not in renumbered:
            assert set(raw_twin.column(j)) <= spellings, f"column {j}: a value the file lacks"
            continue
        # a near-unique number names its row: the twin writes new ones in the column's format
        decimals = {len(v.strip().partition(".")[2]) for v in spellings if v.strip()}
        new = [v for v in raw_twin.column(j) if v not in spellings]
        assert {len(v.strip().partition(".")[2]) for v in new if v.strip()} <= decimals
    if name == "adult":  # fnlwgt: six digits, two rows in three alone with theirs
        fnlwgt = raw_real.header.index("fnlwgt")
        assert fnlwgt in renumbered
        real_weights = set(raw_real.column(fnlwgt))
        kept = sum(v in real_weights for v in raw_twin.column(fnlwgt))
        assert kept < 0.15 * len(raw_twin.rows)  # where weights crowd, a new one can be old

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
    assert copy.spec.extra["twin"]["from_any_row"] == [3, 8]  # Name, Ticket


def test_no_real_row_gives_a_new_row_two_values() -> None:
    """A value that names its row (here every value does) brings none of its row's others."""
    from tabmem.data.synthesis import RowSynthesis

    rows = [[f"a{i}", f"b{i}", f"c{i % 4}", str(i * 7 % 40)] for i in range(40)]
    drawn = RowSynthesis.fit(rows).sample(300, np.random.default_rng(0))
    for row in drawn:
        sources = [int(row[0][1:]), int(row[1][1:])]
        assert sources[0] != sources[1]
        assert rows[sources[0]][2:] != row[2:] or rows[sources[1]][2:] != row[2:]


def test_a_rule_between_columns_is_kept_and_its_rows_are_not_thrown_away() -> None:
    """Nine rows in ten follow y = 7x mod 20; z goes with neither. Split on x and y, z's tree
    gave each new row a real row's z of the same x and y: a copy, thrown away, and a twin in
    which four rows in ten followed the rule."""
    draw = np.random.default_rng(0)
    rows = []
    for _ in range(300):
        x = int(draw.integers(20))
        y = x * 7 % 20 if draw.random() > 0.1 else int(draw.integers(20))
        rows.append((str(x), str(y), f"{draw.random():.2f}"))
    text = "x,y,z\n" + "".join(",".join(row) + "\n" for row in rows)
    data = Dataset(spec=DatasetSpec(name="rule"), path=Path("rule.csv"), text=text)
    follows = lambda table: np.mean([int(r[1]) == int(r[0]) * 7 % 20 for r in table])  # noqa: E731
    for seed in range(3):
        copy = apply_transform(data, {"name": "twin"}, seed)
        assert copy.spec.extra["twin"]["split_on"] == [[], [0], []]
        assert follows(RawTable.from_dataset(copy).rows) == pytest.approx(follows(rows), abs=0.05)


def test_a_name_keeps_its_title_with_the_passengers_sex() -> None:
    """A name comes from any row, and the sex is drawn among the rows of its title: a model
    that knows Mr. is male finds no twin row a woman's. Drawn apart, nearly half disagreed."""
    frame = twin("titanic").frame
    titles = frame.Name.str.extract(r" (Mr|Master|Mrs|Miss)\. ", expand=False)
    male = titles.isin(["Mr", "Master"])
    female = titles.isin(["Mrs", "Miss"])
    assert male.sum() > 400 and female.sum() > 200
    slips = (male & (frame.Sex == "female")) | (female & (frame.Sex == "male"))
    assert slips.mean() < 0.01
    record = twin("titanic").spec.extra["twin"]
    sex = record["split_on"][3]  # the modelled columns: Survived, Pclass, Name, Sex, ...
    assert 3 in sex and 8 not in sex  # Name's title, not Ticket's number


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
    # an education's name and its years are one fact, which rank correlations cannot keep
    years = adult_twin.groupby("Education")["EducationNum"].nunique()
    assert (years == 1).all(), years[years > 1]


def test_twin_is_deterministic_for_a_seed_and_recorded() -> None:
    first, again = twin("wine", 0), apply_transform(real("wine"), {"name": "twin"}, 0)
    other = twin("wine", 1)
    assert first.text == again.text
    assert other.text != first.text
    record = first.spec.extra["twin"]
    assert record["sha256"] == hashlib.sha256(first.text.encode()).hexdigest()
    assert record["source_sha256"] == hashlib.sha256(real("wine").text.encode()).hexdigest()
    assert record["model"].startswith("sequential trees") and record["leaf_rows"] >= 2
    assert first.name == "wine" and first.spec.extra["transform"] == "twin"


def test_a_table_too_small_for_new_rows_is_a_clear_error(tmp_path: Path) -> None:
    text = "kind\nx\nx\ny\ny\n"
    dataset = Dataset(spec=DatasetSpec(name="tiny"), path=tmp_path / "tiny.csv", text=text)
    with pytest.raises(DatasetError, match="differ from every real row"):
        apply_transform(dataset, {"name": "twin"}, 0)


def test_twin_rules_script_writes_each_rules_rate(tmp_path: Path) -> None:
    """scripts/twin_rules.py: the table a user reads for how far the rules see through a twin."""
    import runpy

    script = Path(__file__).parents[2] / "scripts" / "twin_rules.py"
    main = runpy.run_path(str(script))["main"]
    out = tmp_path / "rules.md"
    assert main(["--datasets", "iris", "--seeds", "0", "--pairs", "40", "--out", str(out)]) == 0
    row = next(line for line in out.read_text().splitlines() if line.startswith("| iris"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:3] == ["iris", "0", "40"]
    rates = [float(c) for c in cells[4:]]
    assert all(0.0 <= r <= 1.0 for r in rates) and float(cells[4]) == max(rates[1:])
    assert main(["--datasets", "nosuch", "--out", str(out)]) == 1
