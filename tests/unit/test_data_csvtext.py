"""Records are split the way a CSV reader would split them, with the file's exact characters."""

from __future__ import annotations

from tabmem.data.csvtext import detect_newline, parse_fields, split_records


def test_split_records_keeps_quoted_newlines() -> None:
    text = 'id,note\n1,"first line\nsecond line"\n2,plain\n'
    assert split_records(text) == ["id,note", '1,"first line\nsecond line"', "2,plain"]


def test_split_records_handles_crlf_and_a_missing_final_newline() -> None:
    text = 'a,b\r\n1,"x\r\ny"\r\n2,z'
    assert split_records(text) == ["a,b", '1,"x\r\ny"', "2,z"]
    assert detect_newline(text) == "\r\n"


def test_split_records_keeps_escaped_quotes_inside_a_field() -> None:
    text = 'a,b\n1,"say ""hi""\nthere"\n'
    records = split_records(text)
    assert records[1] == '1,"say ""hi""\nthere"'
    assert parse_fields(records[1]) == ["1", 'say "hi"\nthere']
