"""``python run.py`` checks a cell's settings as ``tabmem run`` does (issue 40, item 5): a
setting the test lacks is one sentence naming the test's settings, not Hydra's advice to add
it with ``+``, which nothing would read."""

from __future__ import annotations

from harness import run_python


def test_run_py_names_a_setting_the_test_lacks_in_one_sentence(tmp_path):
    done = run_python(
        "run.py",
        "model=oracle-memorizer",
        "test=header",
        "test.num_queries=abc",
        f"outputs_dir={tmp_path}",
        timeout=120,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 1
    assert "+test.num_queries" not in said
    [sentence] = done.stderr.strip().splitlines()
    assert sentence.startswith("run.py: test.num_queries is not a setting of test=header")
    assert not (tmp_path / "mlflow.db").exists()  # refused before any cell ran


def test_a_delimiter_hydra_cannot_read_unquoted_is_one_sentence_saying_how_to_quote_it(tmp_path):
    done = run_python(
        "run.py",
        "model=oracle-null",
        "dataset=csv",
        "dataset.path=semicolon.csv",
        "dataset.delimiter=;",
        f"outputs_dir={tmp_path}",
        timeout=120,
    )
    assert done.returncode == 1
    assert "LexerNoViableAltException" not in done.stdout + done.stderr
    [sentence] = done.stderr.strip().splitlines()
    assert sentence.startswith("run.py: Hydra cannot read dataset.delimiter=; unquoted")
    assert """'dataset.delimiter=";"'""" in sentence
