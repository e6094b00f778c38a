"""The paper tables' "Fill with" command: one that runs as written and plans no cell again."""

from __future__ import annotations

from tabmem.report.fill_commands import MissingCells


def test_a_users_own_file_is_named_as_the_csv_config_with_its_name() -> None:
    missing = MissingCells("")
    missing.add("m1", "good", "test=header")
    text = missing.footnote()
    assert "dataset=good" not in text
    assert "`tabmem run -m model=m1 dataset=csv test=header" in text
    assert "dataset.name=good dataset.path=/path/to/good.csv`" in text


def test_shipped_and_own_files_get_a_command_each() -> None:
    missing = MissingCells("")
    missing.add("m1", "iris", "test=header")
    missing.add("m1", "good", "test=header")
    text = missing.footnote()
    assert "`tabmem run -m model=m1 dataset=iris test=header`" in text
    assert "dataset=csv test=header dataset.name=good" in text


def test_a_table_of_every_experiment_names_none_in_its_command() -> None:
    missing = MissingCells("")
    missing.add("m1", "iris", "test=header")
    assert "experiment=" not in missing.footnote()
    chosen = MissingCells("paper")
    chosen.add("m1", "iris", "test=header")
    assert chosen.footnote().count("experiment=paper") == 1


def test_a_users_own_file_is_named_by_the_path_its_runs_recorded() -> None:
    missing = MissingCells("", paths={"good": "data/my good.csv"})
    missing.add("m1", "good", "test=header")
    missing.add("m1", "other", "test=header")
    text = missing.footnote()
    assert "dataset.name=good 'dataset.path=data/my good.csv'`" in text
    assert "dataset.name=other dataset.path=/path/to/other.csv`" in text  # no path recorded
