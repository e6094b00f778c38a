"""A folder of published answers, laid out as the papers' authors published theirs and written
here from the shipped datasets, rescored in one command into a temporary MLflow store, then set
beside the paper's marks by scripts/rescore_published.py."""

from __future__ import annotations

import random

import pandas as pd
import pytest
from harness import call_here, run_python
from mlflow.tracking import MlflowClient

from tabmem.data import dataset_specs, load_dataset
from tabmem.prompts.observations import row_values
from tabmem.rescore.cli import main as rescore
from tabmem.rescore.marks import PaperMarks, comparison, default_marks
from tabmem.results import CellResult
from tabmem.tracking.runs import load_runs

MODEL = "gpt-4-32k-0314"


def shipped(name: str):
    return load_dataset(dataset_specs()[name])


def names(dataset) -> list[str]:
    return [n.strip() for n in dataset.feature_names]


def write_tree(root) -> None:
    """Five files with known counts, one file of an unknown kind, one of a dataset users
    provide."""
    base = root / "results" / MODEL
    wine, iris = shipped("wine"), shipped("iris")
    rows = random.Random(1).sample(range(len(wine.rows)), 40)
    questions = []
    for i, row in enumerate(rows):
        values = dict(zip(names(wine), row_values(wine, row), strict=True))
        truth = values.pop("malic_acid")
        answer = truth if i < 20 else "99.99"
        shown = ", ".join(f"{n} = {v}" for n, v in values.items())
        questions.append([shown, f"malic_acid = {truth}", f"malic_acid = {answer}"])
    write(base / "feature-completion" / "uci-wine.csv", questions, ["prefix", "suffix", "response"])
    copies = [row_values(iris, r) for r in range(0, 150, 10)]
    made_up = [["9.9", "9.9", str(i), "0.1", "Iris-setosa"] for i in range(25)]
    write(base / "samples" / "IRIS-temperature-0.7.csv", copies + made_up, names(iris))
    ordered = []
    for i, row in enumerate(random.Random(2).sample(range(150), 24)):
        values = row_values(iris, row)
        ordered.append([*values[:4], values[4] if i < 18 else "Iris-martian"])
    write(base / "ordered-completion" / "iris-species.csv", ordered, names(iris))
    targets = list(range(20, 140, 6))
    windows = [
        [
            "".join(r + "\n" for r in iris.rows[t - 10 : t]),
            iris.rows[t],
            iris.rows[t] if i % 2 else "x",
        ]
        for i, t in enumerate(targets)
    ]
    write(base / "row-completion" / "IRIS.csv", windows, ["prefix", "suffix", "response"])
    (base / "notes").mkdir()
    (base / "notes" / "iris.csv").write_text("a,b\n1,2\n")
    write(base / "samples" / "fico-temperature-0.7.csv", [["Bad", "60"]], ["RiskPerformance", "X"])


def write(path, lines, columns) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(lines, columns=columns).to_csv(path, index=False)


@pytest.fixture(scope="module")
def rescored(tmp_path_factory):
    root = tmp_path_factory.mktemp("published")
    write_tree(root)
    store = tmp_path_factory.mktemp("store")
    done = call_here(
        rescore, f"--folder={root}", f"--outputs-dir={store}", "--experiment=published"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return root, store, done.stdout


def test_one_command_rescores_every_file_into_its_own_run(rescored):
    _, store, stdout = rescored
    uri = f"sqlite:///{store / 'mlflow.db'}"
    found = load_runs(uri, ["published"])
    runs = found[found["test"] != "dataset"]
    client = MlflowClient(uri)
    counts = {}
    for run in runs.itertuples():
        metrics = client.get_run(run.run_id).data.metrics
        tags = client.get_run(run.run_id).data.tags
        assert tags["source"] == "transcript" and run.model == MODEL
        counts[(run.dataset, run.test)] = (int(metrics["n_hits"]), int(metrics["n_queries"]))
    assert counts[("wine", "feature_completion")] == (20, 40)
    assert counts[("iris", "sample")] == (15, 40)
    assert counts[("iris", "conditional_completion")] == (18, 24)
    assert counts[("iris", "row_completion")] == (10, 20)
    assert ("iris", "first_token") in counts
    assert len(runs) == 5
    # iris's four tests of rows seen join one dataset verdict; wine's one test is its own answer
    [combined] = found[found["test"] == "dataset"].itertuples()
    tags = client.get_run(combined.run_id).data.tags
    assert (combined.model, combined.dataset) == (MODEL, "iris")
    combined_tests = set(tags["combined_tests"].split(","))
    assert {"sample", "conditional_completion", "row_completion"} <= combined_tests
    assert "first_token" in combined_tests or "left_out.first_token" in tags
    assert "tabmem dataset verdicts" in stdout
    assert "7 file × test pairs: 1 needs data, 1 refused, 5 rescored." in stdout
    assert "the mapping names no tests for the kind 'notes'" in stdout
    assert "fico is a dataset users provide: pass --data fico=PATH" in stdout


def test_the_script_sets_the_results_beside_the_paper_marks(rescored, tmp_path):
    root, store, _ = rescored
    out = tmp_path / "table"
    done = run_python(
        "scripts/rescore_published.py",
        str(root),
        f"--outputs-dir={store}",
        f"--out={out}",
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = pd.read_csv(out / "published-answers.csv", dtype=str, keep_default_na=False)
    iris = table[(table.model == MODEL) & (table.dataset == "iris")].set_index("test")
    row = iris.loc["row_completion"]
    assert (row["count"], row["paper"]) == ("10/20", "evidence")
    assert row["disagrees"] == ("" if row["verdict"] == "evidence" else "yes")
    header = iris.loc["header"]
    assert header["verdict"] == "no answers published" and header["paper"] == "evidence"
    assert "Elephants Never Forget" in (out / "published-answers.md").read_text()
    uri = f"sqlite:///{store / 'mlflow.db'}"
    # the second pass read the runs back: the five files' and iris's dataset verdict
    assert len(load_runs(uri, ["published"])) == 5 + 1


def test_a_verdict_against_the_paper_mark_is_flagged():
    marks = PaperMarks.load(default_marks())
    outcome = CellResult("gpt-3.5-turbo", "adult", "row_completion", "original", "finished")
    outcome.source, outcome.verdict, outcome.n_hits, outcome.n_queries = "f.csv", "evidence", 9, 10
    same = CellResult("gpt-4-32k-0314", "titanic", "feature_completion", "original", "finished")
    same.source, same.verdict = "g.csv", "evidence"
    frame = comparison([outcome, same], marks).frame.set_index("file")
    assert frame.loc["f.csv", "paper"] == "evidence_of_absence"
    assert frame.loc["f.csv", "disagrees"] == "yes"
    assert frame.loc["g.csv", "disagrees"] == ""
