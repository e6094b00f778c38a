"""A user's file is read with the delimiter its header shows, and the run says which."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from tabmem.battery import base
from tabmem.data import load_dataset
from tabmem.data.csvtext import sniff_delimiter
from tabmem.data.registry import spec_from_config
from tabmem.errors import DatasetError
from tabmem.paths import conf_dir
from tabmem.results import TestResult, Verdict

ROWS = [["1", "ann", "1.5", "x,y"], ["2", "bob", "2.5", "z"], ["3", "cy", "3.5", "w"]]


def _text(delimiter: str) -> str:
    def quoted(field: str) -> str:
        return f'"{field}"' if "," in field or delimiter in field else field

    lines = [delimiter.join(["id", "name", "height", "note"])]
    lines += [delimiter.join(quoted(f) for f in row) for row in ROWS]
    return "\n".join(lines) + "\n"


def _user_csv(tmp_path: Path, text: str, **overrides: object) -> dict:
    path = tmp_path / "mine.csv"
    path.write_text(text)
    cfg = OmegaConf.to_container(OmegaConf.load(conf_dir() / "dataset" / "csv.yaml"))
    return {**cfg, "path": str(path), "name": "mine", **overrides}


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_sniff_finds_the_delimiter_of_header_and_rows(delimiter: str) -> None:
    assert sniff_delimiter(_text(delimiter)) == delimiter


def test_sniff_ignores_commas_inside_a_semicolon_files_fields() -> None:
    text = "a;b\n1,5;2,5\n3,0;4,0\n"  # decimal commas: two fields by ';', two by ','
    assert sniff_delimiter(text) == ";"  # ';' splits the header too; ',' does not


def test_sniff_of_one_column_is_a_comma() -> None:
    assert sniff_delimiter("x\n1\n2\n") == ","


def test_a_semicolon_file_of_the_csv_config_has_its_four_columns(tmp_path: Path) -> None:
    dataset = load_dataset(_user_csv(tmp_path, _text(";")))
    assert dataset.delimiter == ";"
    assert dataset.feature_names == ["id", "name", "height", "note"]
    assert list(dataset.frame.columns) == ["id", "name", "height", "note"]
    assert dataset.spec.delimiter_sniffed


def test_a_configured_delimiter_is_kept_and_not_sniffed(tmp_path: Path) -> None:
    dataset = load_dataset(_user_csv(tmp_path, _text(";"), delimiter=";"))
    assert dataset.delimiter == ";" and not dataset.spec.delimiter_sniffed


@pytest.mark.parametrize("spelling", ["tab", "\\t", "\t"])
def test_a_tab_can_be_spelled_as_hydra_passes_it(tmp_path: Path, spelling: str) -> None:
    dataset = load_dataset(_user_csv(tmp_path, _text("\t"), delimiter=spelling))
    assert dataset.delimiter == "\t" and len(dataset.feature_names) == 4


def test_a_delimiter_of_two_characters_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"must be one character.*dataset.delimiter="):
        load_dataset(_user_csv(tmp_path, _text(";"), delimiter=";;"))


def test_the_documented_override_parses_to_a_semicolon() -> None:
    parsed = OverridesParser.create().parse_overrides(['dataset.delimiter=";"'])[0]
    assert parsed.value() == ";"


def test_the_docs_give_the_form_hydra_parses() -> None:
    root = conf_dir().parent
    for page in (root / "README.md", root / "docs" / "python-api.md"):
        assert """'dataset.delimiter=";"'""" in page.read_text(), page


def test_a_sniffed_delimiter_is_stated_in_the_result(tmp_path: Path, monkeypatch) -> None:
    dataset = load_dataset(_user_csv(tmp_path, _text(";")))
    verdict = TestResult("fake", Verdict.NO_EVIDENCE, "none", 0, 0)
    monkeypatch.setattr(base, "get_test", lambda name: lambda ctx: verdict)
    result = base.run_test("fake", base.TestContext(dataset, None, {}, 0))
    assert result.info["delimiter"] == ";"
    configured = load_dataset(spec_from_config(_user_csv(tmp_path, _text(","), delimiter=",")))
    verdict.info.clear()
    assert "delimiter" not in base.run_test("fake", base.TestContext(configured, None, {}, 0)).info


@pytest.mark.parametrize("text", ["", "a,b\n"])
def test_a_file_that_cannot_be_read_is_said_without_the_note_on_its_delimiter(
    tmp_path: Path, caplog, text: str
) -> None:
    """Issue 56: the note that the fields were read as comma-separated came before the
    sentence that the file is empty."""
    caplog.set_level("INFO", logger="tabmem.data.registry")
    with pytest.raises(DatasetError):
        load_dataset(_user_csv(tmp_path, text))
    assert not [r for r in caplog.records if "sniffed" in r.getMessage()]


def test_a_file_that_is_read_gets_the_note_on_its_delimiter_once(tmp_path: Path, caplog) -> None:
    caplog.set_level("INFO", logger="tabmem.data.registry")
    cfg = _user_csv(tmp_path, _text(";"))
    load_dataset(cfg)
    load_dataset(cfg)
    [note] = [r.getMessage() for r in caplog.records if "sniffed" in r.getMessage()]
    assert "semicolon-separated" in note
