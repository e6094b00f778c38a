"""data/provenance.json matches the shipped bytes, and the check notices when it does not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tabmem.data.provenance import (
    JSON_NAME,
    MARKDOWN_NAME,
    check,
    config_delimiters,
    dump_provenance,
    load_provenance,
    measure,
    refresh,
    render_markdown,
)
from tabmem.paths import data_dir

PROVENANCE = load_provenance()


def test_shipped_files_match_recorded_sha256_rows_and_columns() -> None:
    assert check(PROVENANCE, data_dir(), config_delimiters()) == []


def test_json_is_in_canonical_form() -> None:
    assert (data_dir() / JSON_NAME).read_text(encoding="utf-8") == dump_provenance(PROVENANCE)


def test_markdown_is_rendered_from_json() -> None:
    text = (data_dir() / MARKDOWN_NAME).read_text(encoding="utf-8")
    assert text == render_markdown(PROVENANCE)
    for entry in PROVENANCE.files:
        assert entry.sha256 in text


def test_every_entry_names_source_and_licence() -> None:
    for entry in PROVENANCE.files + PROVENANCE.user_provided:
        assert entry.source.strip() and entry.licence.strip(), entry.dataset
    assert {u.dataset for u in PROVENANCE.user_provided} >= {"spaceship-titanic", "fico"}


@pytest.fixture()
def copy_of_data(tmp_path: Path) -> Path:
    for entry in PROVENANCE.files:
        if entry.rows < 1000:
            shutil.copyfile(data_dir() / entry.file, tmp_path / entry.file)
    return tmp_path


def _small(provenance=PROVENANCE):
    files = tuple(f for f in provenance.files if f.rows < 1000)
    return type(provenance)(files=files, user_provided=provenance.user_provided)


def test_check_reports_a_changed_byte(copy_of_data: Path) -> None:
    small = _small()
    (copy_of_data / MARKDOWN_NAME).write_text(render_markdown(small), encoding="utf-8")
    delimiters = config_delimiters()
    assert check(small, copy_of_data, delimiters) == []
    iris = copy_of_data / "iris.csv"
    iris.write_bytes(iris.read_bytes().replace(b"5.1,3.5", b"5.1,3.6", 1))
    problems = check(small, copy_of_data, delimiters)
    assert len(problems) == 1 and problems[0].startswith("iris.csv: sha256")


def test_check_reports_missing_unlisted_and_stale_files(copy_of_data: Path) -> None:
    small = _small()
    (copy_of_data / "icu.csv").unlink()
    (copy_of_data / "stray.csv").write_text("a\n1\n", encoding="utf-8")
    problems = check(small, copy_of_data, config_delimiters())
    assert any(p.startswith("icu.csv:") and "missing" in p for p in problems)
    assert any(p.startswith("stray.csv:") for p in problems)
    assert any(p.startswith(MARKDOWN_NAME) for p in problems)


def test_refresh_remeasures_rows(copy_of_data: Path) -> None:
    small = _small()
    iris = copy_of_data / "iris.csv"
    iris.write_bytes(iris.read_bytes() + b"5.0,3.0,1.5,0.2,Iris-setosa\n")
    refreshed = {f.file: f for f in refresh(small, copy_of_data, config_delimiters()).files}
    assert refreshed["iris.csv"].rows == 151
    assert refreshed["iris.csv"].sha256 != PROVENANCE.by_file()["iris.csv"].sha256
    assert refreshed["icu.csv"] == PROVENANCE.by_file()["icu.csv"]


def test_measure_counts_records_not_lines(tmp_path: Path) -> None:
    path = tmp_path / "quoted.csv"
    path.write_bytes(b'id,text\r\n1,"two\nlines"\r\n2,plain\r\n')
    m = measure(path)
    assert (m.rows, m.columns) == (2, 2)
    assert len(m.sha256) == 64


def test_measure_uses_the_delimiter(tmp_path: Path) -> None:
    path = tmp_path / "tabs.tsv"
    path.write_text("a\tb\tc\n1\t2\t3\n", encoding="utf-8")
    assert measure(path, "\t").columns == 3
    assert measure(path, ",").columns == 1
