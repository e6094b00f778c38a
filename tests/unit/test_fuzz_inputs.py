"""Bad input never ends in a traceback: fuzzed CSV files and garbled completions.

Every CSV file (ragged rows, stray quotes, unicode, empty files, huge fields, binary garbage)
either loads and goes through the header test to a result, or stops with one ``TabmemError``
sentence. Every completion, however garbled, is scored without an exception.
"""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

from harness import settings_of
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tabmem.battery.base import TestContext
from tabmem.battery.header import Header
from tabmem.data import DatasetSpec, load_dataset
from tabmem.errors import TabmemError
from tabmem.llm.client import LanguageModel
from tabmem.results import TestResult
from tabmem.stats.scoring import (
    common_prefix_length,
    levenshtein_similarity,
    strip_code_fence,
    verbatim_match,
)

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
TEXT_CHARS = st.characters(codec="utf-8", exclude_categories=["Cs"])
FIELD = st.one_of(
    st.text(alphabet=st.sampled_from('ab1.,"\n\r; é中😀'), max_size=12),
    st.text(alphabet=st.sampled_from("0123456789.-"), max_size=6),
    st.text(TEXT_CHARS, max_size=8),
)
HUGE_FIELD = st.integers(100_000, 300_000).map(lambda n: "x" * n)


@st.composite
def csv_texts(draw: st.DrawFn) -> str:
    """Tables that look like CSV: a header, then rows of the header's width (written as a CSV
    writer would, quoting where needed) or, when ``ragged``, of any width, quoted or not."""
    width = draw(st.integers(1, 5))
    ragged = draw(st.booleans())
    sizes = (max(0, width - 2), width + 2) if ragged else (width, width)
    field = st.one_of(FIELD, HUGE_FIELD) if draw(st.integers(0, 9)) == 0 else FIELD
    rows = draw(
        st.lists(st.lists(field, min_size=sizes[0], max_size=sizes[1]), min_size=0, max_size=14)
    )
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    out = io.StringIO()
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONE]))
    if quoting == csv.QUOTE_NONE:
        lines = [",".join(f"h{i}" for i in range(width)), *(",".join(r) for r in rows)]
        return newline.join(lines) + draw(st.sampled_from(["", newline]))
    writer = csv.writer(out, lineterminator=newline, quoting=quoting)
    writer.writerow([f"h{i}" for i in range(width)])
    writer.writerows(rows)
    return out.getvalue()


CSV_BYTES = st.one_of(
    csv_texts().map(lambda t: t.encode("utf-8")),
    csv_texts().map(lambda t: t.encode("utf-8")),
    csv_texts().map(lambda t: t.encode("utf-8")),
    st.text(TEXT_CHARS, max_size=300).map(lambda t: t.encode("utf-8")),
    st.binary(max_size=300),
    st.just(b""),
    st.just(b"\xef\xbb\xbf"),
    st.just(b"a,b\n1,2\n\x00\n"),
)
COMPLETIONS = st.lists(
    st.one_of(
        st.text(TEXT_CHARS, max_size=200),
        st.text(alphabet=st.sampled_from('```csv\n,"12ab\r'), max_size=60),
        st.just(""),
    ),
    min_size=1,
    max_size=4,
)


class CannedBackend:
    """Answers each query with the next canned completion, whatever it was asked."""

    def __init__(self, completions: list[str]) -> None:
        self.completions = completions
        self.calls = 0
        self.identity = {"provider": "canned", "model": repr(completions)[:200]}

    def complete(self, prompt: str, params) -> str:
        self.calls += 1
        return self.completions[self.calls % len(self.completions)]

    def chat(self, messages, params) -> str:
        return self.complete("", params)

    def count_tokens(self, text: str) -> int | None:
        return None

    def tokenize(self, text: str) -> list[str] | None:
        return None

    def close(self) -> None:
        pass


def load_fuzzed(raw: bytes, folder: Path):
    path = folder / "fuzz.csv"
    path.write_bytes(raw)
    return load_dataset(DatasetSpec(name="fuzz", path=str(path)))


def header_test(dataset, completions: list[str], form: str) -> TestResult:
    model = LanguageModel(CannedBackend(completions), "canned", prompt_form=form)
    model.show_progress = False
    params = settings_of("header", few_shot=1, few_shot_pool=["iris"], system_prompt="Continue.")
    return Header().run(TestContext(dataset, model, params, seed=0))


@FUZZ
@example(raw=b'h0\n\n\n""\n\n', completions=[""], form="chat")  # blank records among others
@given(raw=CSV_BYTES, completions=COMPLETIONS, form=st.sampled_from(["chat", "completion"]))
def test_any_csv_file_ends_in_a_result_or_one_clear_error(raw, completions, form):
    with tempfile.TemporaryDirectory() as folder:
        try:
            dataset = load_fuzzed(raw, Path(folder))
            _ = dataset.feature_names, dataset.rows, dataset.frame
            result = header_test(dataset, completions, form)
        except TabmemError as exc:
            message = str(exc)
            assert message and "\n" not in message.strip() and "Traceback" not in message
            return
    assert isinstance(result, TestResult)
    assert result.n_queries == len(result.records)
    assert 0 <= result.n_hits <= result.n_queries


@FUZZ
@given(expected=st.text(TEXT_CHARS, max_size=200), completion=st.text(TEXT_CHARS, max_size=200))
def test_any_completion_is_scored(expected, completion):
    for newline in ("\n", "\r\n"):
        match = verbatim_match(expected, strip_code_fence(completion), newline)
        assert 0 <= match.rows <= match.expected_rows
        assert match.chars == common_prefix_length(expected, strip_code_fence(completion))
    assert 0.0 <= levenshtein_similarity(expected, completion) <= 1.0


def test_known_bad_files_give_one_sentence_each(tmp_path):
    cases = {
        b"": "is empty",
        b"a,b\n": "no data rows",
        b"\xff\xfe\x00garbage": "not UTF-8",
        b"a,b\n1,2\n\x00\n": "NUL",
        b"a,b\n1,2,3\n": "has 3 fields",
        b'a,b\n"1,2\n': "not valid CSV",
    }
    for raw, words in cases.items():
        try:
            load_fuzzed(raw, tmp_path)
        except TabmemError as exc:
            assert words in str(exc), (raw, str(exc))
        else:
            raise AssertionError(f"{raw!r} loaded")


def test_a_field_longer_than_the_csv_modules_default_limit_loads(tmp_path):
    dataset = load_fuzzed(b"a,b\n1," + b"x" * 300_000 + b"\n2,y\n", tmp_path)
    assert len(dataset.rows) == 2 and dataset.frame.shape == (2, 2)
    result = header_test(dataset, ["y\n"], "completion")
    assert isinstance(result, TestResult)
