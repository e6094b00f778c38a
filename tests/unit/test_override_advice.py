"""A setting a test lacks, or a value of the wrong kind, is one sentence that names the setting
(issue 40): not Hydra's advice to add it with ``+``, which nothing would read."""

from __future__ import annotations

import pytest

from tabmem.main import override_problem, run


def test_a_setting_the_test_lacks_is_one_sentence_naming_it_and_the_tests_settings(capsys):
    status = run(["model=oracle-memorizer", "test=header", "test.num_queries=abc"])
    said = capsys.readouterr()
    assert status == 1
    assert "+test.num_queries" not in said.err + said.out
    [sentence] = said.err.strip().splitlines()
    assert "test.num_queries is not a setting of test=header" in sentence
    assert "split_rows" in sentence and "n_rows" in sentence


def test_a_near_miss_is_named():
    problem = override_problem(["test=completion_choice", "test.num_queries=5"])
    assert problem is not None and "did you mean n_queries?" in problem


@pytest.mark.parametrize(
    ("override", "expects"),
    [
        ("test.n_rows=abc", "test.n_rows expects a number"),
        ("test.n_rows=true", "test.n_rows expects a number"),
        ("test.stop_on_divergence=maybe", "test.stop_on_divergence expects true or false"),
    ],
)
def test_a_value_of_the_wrong_kind_says_what_the_setting_expects(override, expects):
    problem = override_problem(["test=header", override])
    assert problem is not None and problem.startswith(expects)
    assert f"not '{override.split('=')[1]}'" in problem


@pytest.mark.parametrize(
    "arguments",
    [
        ["test=header", "test.n_rows=5", "test.few_shot_row=null"],
        ["model=oracle-memorizer", "model.timeout=2.5", "test.n_rows=${oc.env:ROWS,12}"],
        ["dataset=csv", "dataset.path=/tmp/x.csv", "dataset.name=x"],
        ["+grid=demo", "test.few_shot=1"],
        # the tests of the sweep have n_queries, the default test (header) does not
        ["-m", "test=completion_choice,existence", "test.n_queries=5"],
        ["model=oracle-memorizer", "outputs_dir=/tmp/o", "progress=false"],
    ],
)
def test_settings_the_cell_has_are_left_to_hydra(arguments):
    assert override_problem(arguments) is None
