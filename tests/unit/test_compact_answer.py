"""The end of a run or grid answers in one line per model × dataset that fits a 100-column
terminal with no word broken; every test on request (``detail=true``); a grid's cells say one
line per test as they finish; piped output follows ``COLUMNS``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from tabmem.report.answer import names_within, summary_console
from tabmem.report.dataset_verdicts import dataset_outcomes
from tabmem.report.summary import print_summary
from tabmem.report.terminal import show_brief
from tabmem.results import CellResult, TestResult, Verdict
from tabmem.stats.combine import DatasetRule

MODELS = ("oracle-memorizer", "oracle-null", "oracle-learner", "oracle-partial")
DATASETS = ("iris", "california-housing", "spaceship-titanic")
TESTS = ("header", "row_completion", "feature_completion", "first_token")


def _grid(folder: Path) -> list[CellResult]:
    """48 tests: four models × three files × the memorization suite, one file failing."""
    outcomes = []
    job = 0
    for model in MODELS:
        for dataset in DATASETS:
            group = f"{model}|{dataset}|original|0"
            for test in TESTS:
                if dataset == "spaceship-titanic":
                    outcome = CellResult(
                        model,
                        dataset,
                        test,
                        "original",
                        "failed",
                        run_id=f"run-{job}-{test}",
                        message="Dataset 'spaceship-titanic' needs a file you provide: pass it "
                        "with dataset.path=/path/to/train.csv.",
                        group=group,
                    )
                else:
                    memorized = model == "oracle-memorizer"
                    verdict = "evidence" if memorized else "not_applicable"
                    if model != "oracle-memorizer" and test != "first_token":
                        verdict = "no_evidence"
                    p = 1e-9 if memorized else 0.7
                    outcome = CellResult(
                        model,
                        dataset,
                        test,
                        "original",
                        "finished",
                        verdict,
                        f"{25 if memorized else 0}/25 (p={p:.2g})",
                        f"run-{job}-{test}",
                        p_value=None if verdict == "not_applicable" else p,
                        group=group,
                        model_calls=25,
                    )
                outcome.write(folder / str(job))
                outcomes.append(outcome)
            job += 1
    return outcomes


def _printed(folder: Path, outcomes: list[CellResult], width: int, detail: bool = False):
    verdicts = dataset_outcomes(outcomes, DatasetRule())
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    print_summary(folder, "sqlite:///nowhere.db", "grid", console, verdicts, detail=detail)
    return console.export_text()


def test_one_line_per_model_and_dataset_within_100_columns_no_word_broken(tmp_path):
    outcomes = _grid(tmp_path)
    text = _printed(tmp_path, outcomes, 100)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    start = lines.index("tabmem summary: one answer per model × dataset")
    header, rows = lines[start + 1], lines[start + 2 : start + 2 + len(MODELS) * len(DATASETS)]
    assert header.split() == [
        "model",
        "dataset",
        "verdict",
        "p",
        "grid",
        "q",
        "counts",
        "carried",
        "by",
    ]
    for row, (model, dataset) in zip(rows, [(m, d) for m in MODELS for d in DATASETS], strict=True):
        words = row.split()
        assert words[:2] == [model, dataset], row  # whole words, one line each
    memorizer = rows[0].split()
    assert memorizer[2] == "evidence" and memorizer[5:7] == ["4/4", "tests"]
    assert rows[2].split()[2:6] == ["failed", "-", "-", "4"]
    # every word of the answer is one a cell holds: nothing was cut or folded inside a word
    known = {*MODELS, *DATASETS, *TESTS, "evidence", "no_evidence", "failed", "-", "tests"}
    for row in rows:
        for word in row.replace(",", " ").split():
            assert word in known or word[0].isdigit() or word.startswith("+"), (word, row)
    # the failure is said once, with the cells it hit, not once per test
    assert sum("needs a file you provide" in line for line in lines) == 1


def test_a_48_test_grid_prints_a_screenful_and_every_test_on_request(tmp_path):
    outcomes = _grid(tmp_path)
    assert len(outcomes) == 48
    compact = _printed(tmp_path, outcomes, 100).splitlines()
    assert len(compact) < 30
    detailed = _printed(tmp_path, outcomes, 100, detail=True)
    assert "tabmem summary: every test" in detailed
    assert max(len(line) for line in detailed.splitlines()) <= 100
    for outcome in outcomes:
        assert outcome.run_id[:12] in detailed


def test_carrying_tests_are_shortened_to_fit_never_cut_inside_a_name():
    names = ["feature_completion", "row_completion", "first_token", "header"]
    assert names_within(names, 100) == ", ".join(names)
    assert names_within(names, 40) == "feature_completion, row_completion +2"
    assert names_within(names, 21) == "feature_completion +3"
    assert names_within(names, 10) == "4 tests"
    assert names_within([], 10) == "-"


@pytest.mark.parametrize(("columns", "width"), [("220", 220), ("80", 80), (None, 100)])
def test_piped_output_follows_columns_else_100(monkeypatch, columns, width):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert summary_console().width == width


def test_a_grids_test_says_one_line():
    result = TestResult(
        "row_completion", Verdict.EVIDENCE, "a long reason " * 30, 25, 25, p_value=3e-43
    )
    console = Console(width=100, record=True, file=io.StringIO(), color_system=None)
    show_brief(result, "oracle-memorizer | iris | row_completion | original", "25/25", console)
    (line,) = console.export_text().splitlines()
    assert line.split() == [
        "evidence",
        "oracle-memorizer",
        "|",
        "iris",
        "|",
        "row_completion",
        "|",
        "original",
        "25/25",
    ]
