"""Rescoring transcripts: published CSV files written here from the real iris and wine files,
with known numbers of right answers, scored by the tests' own scoring and verdicts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest
from harness import settings_of

from tabmem.battery.base import TestContext
from tabmem.battery.feature_completion import question
from tabmem.battery.header import split_at_row
from tabmem.battery.lifecycle import Recorded, rescorable_test
from tabmem.data import dataset_specs, load_dataset
from tabmem.errors import ConfigError, DatasetError
from tabmem.rescore import read_transcript, rescore
from tabmem.results import Verdict
from tabmem.stats.uniqueness import text_columns

PREFIX_ROWS = 10


def shipped(name: str):
    return load_dataset(dataset_specs()[name])


def windows(dataset, targets):
    rows = dataset.rows
    return ["".join(r + "\n" for r in rows[t - PREFIX_ROWS : t]) for t in targets]


def published(path: Path, prefixes, suffixes, responses) -> Path:
    frame = pd.DataFrame({"prefix": prefixes, "suffix": suffixes, "response": responses})
    frame.to_csv(path, index=False)
    return path


def context(dataset, test: str, **params) -> TestContext:
    settings = settings_of(test, **params)
    if "prefix_rows" in settings:
        settings["prefix_rows"] = PREFIX_ROWS
    return TestContext(dataset=dataset, model=None, params=settings, seed=0)


@pytest.fixture(scope="module")
def iris():
    return shipped("iris")


def row_transcript(tmp_path, iris, right: int, wrong: int, foreign: int = 0) -> Path:
    """``right`` windows answered with the true next row, ``wrong`` with another row of the
    file, and ``foreign`` windows of wine's rows."""
    rng = random.Random(3)
    targets = rng.sample(range(PREFIX_ROWS, len(iris.rows)), right + wrong)
    prefixes = windows(iris, targets)
    suffixes = [iris.rows[t] for t in targets]
    responses = [
        iris.rows[t] if i < right else iris.rows[(t + 37) % len(iris.rows)]
        for i, t in enumerate(targets)
    ]
    if foreign:
        wine = shipped("wine")
        far = rng.sample(range(PREFIX_ROWS, len(wine.rows)), foreign)
        prefixes += windows(wine, far)
        suffixes += [wine.rows[t] for t in far]
        responses += [wine.rows[t] for t in far]
    return published(tmp_path / "iris-rows.csv", prefixes, suffixes, responses)


def test_published_rows_give_exactly_the_known_count_and_evidence(tmp_path, iris):
    path = row_transcript(tmp_path, iris, right=9, wrong=11)
    lines = read_transcript(path, "published")
    result, located = rescore(
        rescorable_test("row_completion"), context(iris, "row_completion"), lines
    )
    assert (result.n_hits, result.n_queries) == (9, 20)
    assert result.verdict is Verdict.EVIDENCE
    assert result.p_value < 1e-6
    assert not located.missing and result.metrics["queries_not_located"] == 0


def test_wrong_rows_only_are_no_evidence(tmp_path, iris):
    path = row_transcript(tmp_path, iris, right=0, wrong=20)
    result, _ = rescore(
        rescorable_test("row_completion"),
        context(iris, "row_completion"),
        read_transcript(path, "published"),
    )
    assert (result.n_hits, result.n_queries) == (0, 20)
    assert result.verdict is Verdict.NO_EVIDENCE


def test_windows_from_another_file_are_counted_as_not_located(tmp_path, iris):
    path = row_transcript(tmp_path, iris, right=9, wrong=11, foreign=4)
    result, located = rescore(
        rescorable_test("row_completion"),
        context(iris, "row_completion"),
        read_transcript(path, "published"),
    )
    assert located.lines == 24 and len(located.queries) == 20
    assert sum(located.missing.values()) == 4
    assert result.metrics["queries_not_located"] == 4
    assert result.n_hits == 9  # the wine rows, all "right" for wine, are not scored
    assert "4 × " in result.info["not_located"]


def test_first_token_is_scored_from_row_completion_answers(tmp_path, iris):
    path = row_transcript(tmp_path, iris, right=9, wrong=11)
    test = rescorable_test("first_token")
    ctx = context(iris, "first_token", baseline_min_rows=50, context_rows=3)
    result, _ = rescore(test, ctx, read_transcript(path, "published"))
    truth = [r.extra["expected_token"] == r.extra["answer_token"] for r in result.records]
    assert result.n_queries == 20
    assert result.n_hits == sum(truth) >= 9
    assert result.info["tokenizer"] == "text rule"


def test_a_suffix_that_is_not_the_next_row_is_not_located(tmp_path, iris):
    target = 40
    path = published(
        tmp_path / "t.csv", windows(iris, [target]), [iris.rows[target + 1]], [iris.rows[target]]
    )
    with pytest.raises(DatasetError, match="None of the 1 lines"):
        rescore(
            rescorable_test("row_completion"),
            context(iris, "row_completion"),
            read_transcript(path, "published"),
        )


def test_feature_questions_are_located_by_their_values(tmp_path):
    adult = shipped("adult")
    columns = text_columns(adult)
    rows = random.Random(1).sample(range(len(adult.rows)), 12)
    asked = [question(columns, row, "fnlwgt") for row in rows]
    responses = [q.answer if i < 5 else "1" for i, q in enumerate(asked)]
    path = published(
        tmp_path / "f.csv", [q.prompt for q in asked], [q.answer for q in asked], responses
    )
    lines = read_transcript(path, "published")
    test = rescorable_test("feature_completion")
    ctx = context(adult, "feature_completion", **test.settings_for(lines))
    result, located = rescore(test, ctx, lines)
    assert [q.row for q, _ in located.queries] == rows
    assert (result.n_hits, result.n_queries) == (5, 12)
    assert result.info["feature"] == "fnlwgt"


def test_a_missing_column_and_an_unscoring_test_are_one_sentence_errors(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("prefix,answer\na,b\n")
    with pytest.raises(DatasetError, match="lacks the column"):
        read_transcript(path, "published")
    with pytest.raises(ConfigError, match="cannot score recorded answers yet"):
        rescorable_test("feature_names")
    with pytest.raises(ConfigError, match="Unknown test 'nope'"):
        rescorable_test("nope")


def test_queries_json_keeps_failed_queries_failed(tmp_path, iris):
    target = 30
    table = {
        "columns": ["prompt", "expected", "completion", "score", "error", "prefix"],
        "data": [["p", iris.rows[target], "", 0.0, "timed out", windows(iris, [target])[0]]],
    }
    path = tmp_path / "queries.json"
    path.write_text(json.dumps(table))
    (line,) = read_transcript(path, "queries")
    assert line == Recorded(
        "p", windows(iris, [target])[0], iris.rows[target], "", "timed out", line=1
    )


def test_header_splits_are_located_from_the_file_beginning(tmp_path, iris):
    rng = random.Random(0)
    splits = [split_at_row(iris, row, 12, rng) for row in (2, 4, 6, 8)]
    responses = [s.continuation if s.row in (4, 6) else "5.0,3.0\n" for s in splits]
    wine = split_at_row(shipped("wine"), 3, 12, rng)
    path = published(
        tmp_path / "h.csv",
        [s.prefix for s in splits] + [wine.prefix],
        [s.continuation for s in splits] + [wine.continuation],
        [*responses, wine.continuation],
    )
    result, located = rescore(
        rescorable_test("header"), context(iris, "header"), read_transcript(path, "published")
    )
    assert [q.split.row for q, _ in located.queries] == [2, 4, 6, 8]
    assert [q.split.continuation for q, _ in located.queries] == [s.continuation for s in splits]
    assert sum(located.missing.values()) == 1
    assert result.verdict is Verdict.EVIDENCE
    assert result.metrics["best_verbatim_rows"] == 12 - 4
    assert result.n_hits == 2  # one split of four is not below alpha on iris (docs/tests.md)
