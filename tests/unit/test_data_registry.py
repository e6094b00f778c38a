"""Dataset configs, shipped files and the loader's errors for people."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from tabmem.data import Dataset, dataset_specs, load_dataset
from tabmem.data.provenance import load_provenance
from tabmem.errors import DatasetError

# One list per fact: what ships is data/provenance.json's, so a new file is tested by being
# listed there with its config in conf/dataset/.
SPECS = dataset_specs()
PROVENANCE = load_provenance().by_file()
SERIES = ["wti-oil", "series"]  # time series for test=forecast (kind: series)
SHIPPED = sorted(r.dataset for r in PROVENANCE.values() if r.dataset not in SERIES)
USER_PROVIDED = sorted(u.dataset for u in load_provenance().user_provided)
ANY_CSV = ["csv"]  # a user's own tabular file (dataset=csv dataset.path=..., or tabmem.run)


@pytest.fixture(scope="module")
def loaded() -> dict[str, Dataset]:
    return {name: load_dataset(SPECS[name]) for name in SHIPPED}


def test_every_expected_config_exists_and_nothing_else() -> None:
    assert sorted(SPECS) == sorted(SHIPPED + USER_PROVIDED + SERIES + ANY_CSV)


@pytest.mark.parametrize("name", SHIPPED + USER_PROVIDED)
def test_config_fields_are_consistent(name: str) -> None:
    spec = SPECS[name]
    assert spec.kind == "tabular"
    assert spec.description and spec.family and spec.target
    assert spec.path is None
    if spec.user_provided:
        assert spec.file is None
        assert "dataset.path=" in spec.how_to_get
    else:
        assert spec.file in PROVENANCE
        assert PROVENANCE[spec.file].dataset == name
        assert spec.how_to_get is None


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_dataset_loads_with_provenance_row_count(name: str, loaded) -> None:
    dataset = loaded[name]
    record = PROVENANCE[SPECS[name].file]
    assert len(dataset.records) == record.rows + 1
    assert len(dataset.feature_names) == record.columns
    assert SPECS[name].target in dataset.feature_names
    assert len(dataset.frame) == record.rows


def test_scikit_diabetes_is_tab_separated(loaded) -> None:
    dataset = loaded["scikit-diabetes"]
    assert "\t" in dataset.header and "," not in dataset.text
    assert dataset.feature_names[0] == "AGE" and dataset.feature_names[-1] == "Y"


def test_families_keep_related_datasets_apart_and_unrelated_ones_separate() -> None:
    assert SPECS["titanic"].family_name == SPECS["spaceship-titanic"].family_name
    assert SPECS["openml-diabetes"].family_name != SPECS["scikit-diabetes"].family_name
    assert SPECS["acs-income"].family_name == SPECS["acs-travel"].family_name


@pytest.mark.parametrize("name", USER_PROVIDED)
def test_user_provided_dataset_says_how_to_get_it(name: str) -> None:
    spec = SPECS[name]
    with pytest.raises(DatasetError) as info:
        load_dataset(spec)
    assert spec.how_to_get in str(info.value)
    assert name in str(info.value)


def test_user_provided_dataset_loads_from_dataset_path(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_text("PassengerId,Transported\n0001_01,False\n", encoding="utf-8")
    dataset = load_dataset(replace(SPECS["spaceship-titanic"], path=str(path)))
    assert dataset.rows == ["0001_01,False"]


def _load_file(path: Path) -> Dataset:
    return load_dataset({"name": "scratch", "path": str(path)})


def test_missing_dataset_path_is_a_dataset_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"dataset\.path="):
        _load_file(tmp_path / "absent.csv")


def test_empty_file_is_a_dataset_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    with pytest.raises(DatasetError, match="empty"):
        _load_file(path)


def test_header_only_file_is_a_dataset_error(tmp_path: Path) -> None:
    path = tmp_path / "header.csv"
    path.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="no data rows"):
        _load_file(path)


def test_ragged_csv_is_a_dataset_error(tmp_path: Path) -> None:
    path = tmp_path / "ragged.csv"
    path.write_text("a,b\n1,2\n3\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="record 3"):
        _load_file(path)


def test_non_utf8_file_is_a_dataset_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("name,city\nJosé,Málaga\n".encode("latin-1"))
    with pytest.raises(DatasetError, match="UTF-8"):
        _load_file(path)


def test_adult_frame_strips_leading_whitespace_from_categories(loaded) -> None:
    dataset = loaded["adult"]
    assert ", State-gov," in dataset.rows[0]
    frame = dataset.frame
    text_columns = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    assert "WorkClass" in text_columns and "Income" in text_columns
    for column in text_columns:
        values = frame[column].dropna()
        assert not values.str.match(r"\s").any(), column
    assert frame["WorkClass"].iloc[0] == "State-gov"
    assert set(frame["Income"]) == {"<=50K", ">50K"}
