"""Series datasets: the shipped WTI series, a user's file by dataset.path=, and clear errors."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.data.series import series_view
from tabmem.errors import DatasetError
from tabmem.llm.oracle import MemorizerOracle, NullOracle
from tabmem.llm.oracle.models import seen_part

ROOT = Path(__file__).resolve().parents[2]


def dataset(text: str, **extra) -> Dataset:
    spec = DatasetSpec(name="s", kind="series", extra=extra)
    return Dataset(spec=spec, path=Path("s.csv"), text=text)


def test_shipped_wti_series_loads_in_time_order():
    series = series_view(load_dataset(dataset_specs()["wti-oil"]))
    assert len(series) == 8321 and series.dropped_rows == 0
    assert (series.date_text[0], series.value_text[0]) == ("1986-01-02", "25.56")
    assert series.date_text[-1] == "2019-01-03"
    assert (series.date_name, series.value_name) == ("date", "value")


def test_rows_without_a_number_are_left_out_and_counted():
    series = series_view(dataset("date,value\n2020-01-01,1.5\n2020-01-02,.\n2020-01-03,2\n"))
    assert series.date_text == ("2020-01-01", "2020-01-03")
    assert series.values.tolist() == [1.5, 2.0] and series.dropped_rows == 1


def test_columns_can_be_chosen_by_name():
    text = "Date,Open,Close\n1/2/2020,1,2\n1/3/2020,3,4\n"
    series = series_view(dataset(text, date_column="Date", value_column="Close"))
    assert series.value_text == ("2", "4") and series.dates[1].day == 3


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("date,value\n2020-01-02,1\n2020-01-01,2\n", {}, "sort the file by date"),
        ("date,value\n2020-01-01,1\n2020-01-01,2\n", {}, "each date once"),
        ("date,value\nnot-a-day,1\n", {}, "not a date"),
        ("date\n2020-01-01\n", {}, "a date column and a value column"),
        ("date,value\n2020-01-01,1\n", {"value_column": "Close"}, "no column 'Close'"),
    ],
)
def test_malformed_series_stop_with_one_sentence(text, extra, message):
    with pytest.raises(DatasetError, match=message):
        series_view(dataset(text, **extra))


def test_a_users_series_file_comes_by_dataset_path(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("day,price\n2023-01-02,10\n2023-01-03,11\n")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(
            "config",
            overrides=["dataset=series", f"dataset.path={path}", "test=forecast"],
        )
    loaded = load_dataset(cfg.dataset)
    assert loaded.spec.kind == "series" and cfg.test.name == "forecast"
    assert series_view(loaded).value_text == ("10", "11")


def test_the_oracles_know_a_series_only_up_to_its_simulated_cutoff():
    text = "date,value\n2020-01-01,1.5\n2020-01-02,2.5\n2020-01-03,3.5\n"
    seen = seen_part(dataset(text, oracle_knows_until="2020-01-02"))
    assert seen.text == "date,value\n2020-01-01,1.5\n2020-01-02,2.5\n"
    memorizer = MemorizerOracle([dataset(text, oracle_knows_until="2020-01-02")])
    ask = "date = {}\nvalue ="
    assert memorizer.generate(ask.format("2020-01-02"), 8, [], 0, chat=True) == "2.5"
    assert memorizer.generate(ask.format("2020-01-03"), 8, [], 0, chat=True) != "3.5"
    knows_all = MemorizerOracle([dataset(text)])
    assert knows_all.generate(ask.format("2020-01-03"), 8, [], 0, chat=True) == "3.5"
    assert NullOracle([]).generate(ask.format("2020-01-02"), 8, [], 0, chat=True) != "2.5"


def test_the_shipped_series_is_known_to_the_oracles_until_2014():
    wti = load_dataset(dataset_specs()["wti-oil"])
    assert seen_part(wti).rows[-1].startswith("2014-12-31,")
