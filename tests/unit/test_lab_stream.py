"""The other text a lab model reads between its planted files: sources, budget, seeding."""

import random

import pytest

from tabmem.data import dataset_specs, load_dataset
from tabmem.errors import ConfigError
from tabmem.lab.stream import Stream, load_stream, other_documents

POOL = ["icu", "iris", "wine", "synthetic-novel"]


def words(text):
    return len(text.split())


def test_no_stream_section_reads_the_planted_files_alone():
    assert load_stream(None, POOL) is None
    assert load_stream({}, POOL) is None


@pytest.mark.parametrize(
    "section", [{"ratio": 0}, {"sources": ["code", "novels"]}, {"ratio": -1.0}]
)
def test_a_bad_stream_is_one_sentence(section):
    with pytest.raises(ConfigError, match="ratio > 0 and sources among code, prose, tables"):
        load_stream(section, POOL)


def test_tables_come_only_from_files_outside_the_pool():
    stream = load_stream({"ratio": 0.5}, POOL)
    assert stream.ratio == 0.5 and stream.sources == ("code", "prose", "tables")
    assert stream.tables and not set(stream.tables) & set(POOL)
    assert "wti-oil" not in stream.tables  # a series is not a table read as text
    assert load_stream({"sources": ["code"]}, POOL).tables == ()


def test_documents_fill_the_budget_from_the_chosen_sources_and_are_seeded():
    stream = load_stream({"sources": ["tables"]}, POOL)
    docs = other_documents(stream, 3000, words, random.Random(1))
    assert sum(map(words, docs)) >= 3000
    assert sum(map(words, docs[:-1])) < 3000  # no document more than needed
    headers = {load_dataset(dataset_specs()[t]).records[0] for t in stream.tables}
    assert all(d.splitlines()[0] in headers for d in docs)
    assert all(len(d.splitlines()) > 2 for d in docs)
    assert docs == other_documents(stream, 3000, words, random.Random(1))
    assert docs != other_documents(stream, 3000, words, random.Random(2))


def test_code_is_python_source_and_prose_is_its_docstrings():
    code = other_documents(Stream(1.0, ("code",), ()), 2000, words, random.Random(0))
    prose = other_documents(Stream(1.0, ("prose",), ()), 2000, words, random.Random(0))
    assert all(0 < len(d) <= 4000 for d in code + prose)
    assert any(k in "".join(code) for k in ("def ", "import ", "class "))
    text = " ".join(prose)
    assert text.count("def ") < text.count(" the ")  # sentences, not code
