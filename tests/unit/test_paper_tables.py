"""make paper-tables from a small MLflow store logged in the test (no model): every table and
figure is written, each number is the logged one, traced to its run, and nothing is invented."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabmem.data import dataset_specs, load_dataset
from tabmem.report.fill_commands import MissingCells
from tabmem.report.learning_figures import accuracy_difference_figure, memorization_status
from tabmem.report.paper import write_paper
from tabmem.report.paper_runs import PaperRuns, tabular_tests
from tabmem.report.sample_figures import correlation_matrix, feature_pair
from tabmem.tracking.store import TrackingStore, default_tracking_uri, sqlite_path

EXPERIMENT = "paper-unit"
MEMORIZATION = ("header", "row_completion", "feature_completion", "first_token")
KNOWLEDGE = ("feature_names", "feature_values", "feature_distribution", "conditional_distribution")
TRANSFORMS = ("original", "perturbed", "task", "statistical")


class Store:
    """A real MLflow store, and the id of every run logged into it by (model, dataset, test, …)."""

    def __init__(self, outputs: Path, experiment: str = EXPERIMENT) -> None:
        self.uri = default_tracking_uri(outputs)
        self.store = TrackingStore(
            uri=self.uri,
            artifact_root=outputs / "mlartifacts",
            experiment=experiment,
            lock_path=outputs / "mlflow.lock",
        )
        self.ids: dict[tuple[str, ...], str] = {}

    def log(
        self,
        model: str,
        dataset: str,
        test: str,
        verdict: str = "evidence",
        transform: str = "original",
        metrics: dict[str, float] | None = None,
        info: dict[str, str] | None = None,
        tables: dict[str, pd.DataFrame] | None = None,
        params: dict[str, str] | None = None,
        failed: bool = False,
    ) -> str:
        backend = "baseline" if model in ("logistic-regression", "gradient-boosted-tree") else "x"
        tags = {
            "model": model,
            "dataset": dataset,
            "test": test,
            "transform": transform,
            "verdict": "failed" if failed else verdict,
            "reason": f"{test} says {verdict}",
            **{f"info.{k}": v for k, v in (info or {}).items()},
        }
        run_params = {"model.backend": backend, "test.name": test, **(params or {})}
        run_id = self.store.log_cell(
            f"{model} | {dataset} | {test} | {transform}",
            tags,
            run_params,
            metrics or {},
            tables or {},
            {},
            failed=failed,
        )
        key = (model, dataset, test, transform, (params or {}).get("test.temperature", ""))
        self.ids[tuple(k for k in key if k)] = run_id
        return run_id


def hits(n_hits: int, n: int, baseline: float = 0.0) -> dict[str, float]:
    return {"n_hits": n_hits, "n_queries": n, "rate": n_hits / n, "baseline": baseline}


def california_samples(n: int, copies: int) -> pd.DataFrame:
    """n samples whose first ``copies`` are real rows of california-housing."""
    data = load_dataset(dataset_specs()["california-housing"]).frame
    rows = data.head(n).astype(str).copy()
    rows.loc[rows.index[copies:], "longitude"] = "-120.5"
    return rows.assign(sample=range(n), complete=True, problem="")


def log_store(outputs: Path) -> Store:
    """Two language models and two baselines on iris and california-housing (and a dataset
    outside the paper's list), with the edge cases the tables must get right."""
    s = Store(outputs)
    s.log("gpt-x", "iris", "header", "no_evidence", metrics=hits(0, 4))  # superseded below
    for model, verdict in (("gpt-x", "evidence"), ("oracle-null", "no_evidence")):
        s.log(model, "iris", "header", verdict, metrics=hits(4 if model == "gpt-x" else 0, 4))
        s.log(
            model,
            "iris",
            "row_completion",
            verdict,
            metrics=hits(20 if verdict == "evidence" else 0, 25),
        )
        s.log(
            model,
            "iris",
            "feature_completion",
            verdict,
            metrics=hits(18 if verdict == "evidence" else 1, 25, 0.02),
            info={"feature": "petal_length"},
        )
        s.log(
            model,
            "iris",
            "first_token",
            verdict,
            metrics=hits(24 if verdict == "evidence" else 9, 25, 0.63),
            info={"best_baseline": "mode"},
        )
        s.log(
            model,
            "california-housing",
            "first_token",
            "not_applicable",
            metrics={"n_hits": 0, "n_queries": 0},
        )
        for test in KNOWLEDGE:
            s.log(model, "iris", test, verdict)
        s.log(model, "iris", "dataset", verdict, metrics={"p_value": 1e-9})  # combined
    s.log("oracle-null", "iris", "row_completion", failed=True)  # a failed re-run: ignored
    pairs = pd.DataFrame(
        {
            "feature_a": ["sepal_length", "sepal_length", "petal_length"],
            "feature_b": ["petal_length", "petal_width", "petal_width"],
            "data_r": [0.87, 0.82, 0.96],
            "sample_r": [0.5, 0.4, float("nan")],
        }
    )
    s.log(
        "gpt-x",
        "iris",
        "conditional_distribution",
        "ambiguous",
        tables={"correlation_pairs.json": pairs},
    )
    for temperature, copies in (("0.7", 3), ("0.2", 9)):
        s.log(
            "gpt-x",
            "california-housing",
            "sample",
            "evidence",
            metrics={
                "n_queries": 20,
                "samples_complete": 20,
                "copies": copies,
                "distinct_copies": copies - 1,
                "copy_chance": 1e-6,
                "copy_p_value": 1e-12,
                "best_match_samples": 9.5,
                "best_match_real_rows": 3.3,
                "known_value_share": 0.87,
            },
            tables={"samples.json": california_samples(20, copies)},
            params={"test.temperature": temperature},
        )
    for transform, (llm, lr) in zip(
        TRANSFORMS, ((0.8, 0.9), (0.7, 0.9), (0.75, 0.88), (0.7, 0.86)), strict=True
    ):
        for model, accuracy in (("gpt-x", llm), ("logistic-regression", lr)):
            s.log(
                model,
                "iris",
                "fewshot_predict",
                "evidence",
                transform=transform,
                metrics={
                    "accuracy": accuracy,
                    "accuracy_se": math.sqrt(accuracy * (1 - accuracy) / 150),
                },
            )
    s.log("gpt-x", "mydata", "fewshot_predict", "not_applicable")
    curves = pd.DataFrame(
        [
            {
                "dimension": d,
                "shots": k,
                "learner": learner,
                "accuracy": acc,
                "ci_low": acc - 0.1,
                "ci_high": acc + 0.1,
                "n": 50,
            }
            for d, k in ((1, 20), (8, 20), (8, 5), (8, 80))
            for learner, acc in (
                ("model", 0.6),
                ("logistic_regression", 0.9),
                ("nearest_neighbour", 0.7),
            )
        ]
    )
    s.log(
        "gpt-x",
        "synthetic-novel",
        "statistical_learning",
        "evidence",
        tables={"curves.json": curves},
        params={"test.fixed_shots": "20", "test.fixed_dimension": "8"},
    )
    return s


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("store")
    store = log_store(outputs)
    out = outputs / "paper"
    report = write_paper(store.uri, out, [EXPERIMENT])
    tables = {t.name: t for t in report.tables}
    return store, out, report, tables


def frame_of(out: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(out / f"{name}.csv", keep_default_na=False, dtype=str)


def cell(frame: pd.DataFrame, column: str, **where: str) -> str:
    mask = np.logical_and.reduce([frame[k] == v for k, v in where.items()])
    values = frame.loc[mask, column].tolist()
    assert len(values) == 1, (where, values)
    return values[0]


def test_every_table_and_figure_is_written_in_every_format(built):
    _, out, report, tables = built
    assert {
        "overview",
        "completion",
        "first_token",
        "fewshot_accuracy",
        "lr_accuracy",
        "gbt_accuracy",
        "samples",
    } <= set(tables)
    for name in tables:
        for ext in ("md", "tex", "csv"):
            assert (out / f"{name}.{ext}").stat().st_size > 0, (name, ext)
    figures = {f.name for f in report.figures}
    assert {
        "accuracy_difference_to_lr",
        "statistical_learning",
        "samples_scatter_california-housing",
        "correlations_iris",
    } <= figures
    for name in figures:
        for ext in ("png", "pdf"):
            assert (out / f"{name}.{ext}").stat().st_size > 1000, (name, ext)


def test_lab_runs_get_their_rate_table_and_figure(tmp_path):
    store = Store(tmp_path, "paper-unit-lab")
    lab = {"model.lab.setting": "unit", "model.lab.passes": "8", "model.lab.planted.iris": "8"}
    store.log("lab-unit-p8", "iris", "header", params={**lab, "model.lab.seen.iris": "8"})
    store.log("lab-unit-p8", "wine", "header", "no_evidence", params=lab)
    out = tmp_path / "paper"
    tables = {t.name: t for t in write_paper(store.uri, out, ["paper-unit-lab"]).tables}
    frame = frame_of(out, "lab-unit")
    assert frame["detected / cells"].tolist() == ["1 / 1", "0 / 1"]
    assert frame["group"].tolist() == ["planted", "held out"]
    assert set(tables["lab-unit"].run_ids) == {
        store.ids[("lab-unit-p8", d, "header", "original")] for d in ("iris", "wine")
    }
    assert (out / "lab-unit-tpr.png").stat().st_size > 1000
    assert "lab-unit" in (out / "index.md").read_text()


def test_overview_has_one_mark_per_cell_and_the_newest_run(built):
    _, out, _, _ = built
    frame = frame_of(out, "overview")
    # one row per dataset and model: each cell is one model's mark, named by its row
    assert frame[frame["dataset"] == "iris"]["model"].tolist() == ["gpt-x", "oracle-null"]
    # gpt-x's newer header run (evidence) replaced its older one (no evidence)
    assert cell(frame, "header", dataset="iris", model="gpt-x") == "✓"
    assert cell(frame, "header", dataset="iris", model="oracle-null") == "✗"
    assert cell(frame, "first token", dataset="california-housing", model="gpt-x") == "-"
    assert cell(frame, "conditional distribution", dataset="iris", model="gpt-x") == "?"
    assert all(" " not in value for value in frame.drop(columns=["dataset", "model"]).stack())
    text = (out / "overview.md").read_text()
    assert "in model order" not in text
    # a dataset no model ran is named once, not a row of dashes per model
    assert "wine" not in set(frame["dataset"])
    assert "No run yet on " in text and "wine" in text.split("No run yet on ", 1)[1]
    # the columns are the paper grid's knowledge and memorization suites: iris has no
    # dataset name, sample or conditional completion run, wine none at all
    assert "`tabmem run -m model=gpt-x,oracle-null dataset=iris,wine,titanic," in text
    assert "python run.py" not in text
    assert "test=dataset_name,sample,conditional_completion,feature_names," in text
    # the dataset verdict first (where it has no run, the fill command does not name it)
    assert cell(frame, "dataset verdict", dataset="iris", model="gpt-x") == "✓"
    assert cell(frame, "dataset verdict", dataset="iris", model="oracle-null") == "✗"
    assert list(frame.columns)[1:] == [
        "model",
        "dataset verdict",
        "feature names",
        "dataset name",
        "feature values",
        "feature distribution",
        "sample",
        "conditional distribution",
        "conditional completion",
        "header",
        "row completion",
        "feature completion",
        "first token",
    ]
    assert "user-provided" in text.lower() and "dataset.path=" in text


def test_completion_and_first_token_counts_are_the_logged_ones(built):
    _, out, _, tables = built
    frame = frame_of(out, "completion")
    assert cell(frame, "row: gpt-x", dataset="iris") == "20/25"
    assert cell(frame, "feature: oracle-null", dataset="iris") == "1/25"
    assert cell(frame, "feature", dataset="iris") == "petal_length"
    assert "wine" not in set(frame["dataset"])  # no run: left out, and said so
    assert any("no run yet on wine" in n for n in tables["completion"].footnotes)
    first = frame_of(out, "first_token")
    assert cell(first, "gpt-x", dataset="iris") == "0.96 (24/25)"
    assert cell(first, "baseline", dataset="iris") == "0.63 (mode)"
    assert cell(first, "oracle-null", dataset="california-housing") == "n/a"
    assert any(
        "first token): first_token says not_applicable" in n
        for n in tables["first_token"].footnotes
    )


def test_fewshot_tables_show_accuracy_with_standard_errors_and_lr_rows(built):
    _, out, _, tables = built
    frame = frame_of(out, "fewshot_accuracy")
    assert cell(frame, "original", dataset="iris", model="gpt-x") == "0.80 ± 0.03"
    assert cell(frame, "statistical", dataset="iris", model="LR") == "0.86 ± 0.03"
    assert not ((frame["dataset"] == "iris") & (frame["model"] == "GBT")).any()  # none
    assert cell(frame, "original", dataset="mydata", model="gpt-x") == "n/a"
    lr = frame_of(out, "lr_accuracy")
    assert [cell(lr, t, dataset="iris") for t in TRANSFORMS] == [
        "0.90 ± 0.02",
        "0.90 ± 0.02",
        "0.88 ± 0.03",
        "0.86 ± 0.03",
    ]
    gbt = tables["gbt_accuracy"]
    assert "model=gradient-boosted-tree" in gbt.footnotes[-1]
    assert "transform=original,perturbed,task,statistical" in gbt.footnotes[-1]


def test_samples_table_has_one_row_per_temperature(built):
    _, out, _, _ = built
    frame = frame_of(out, "samples")
    rows = frame[(frame["dataset"] == "california-housing") & (frame["model"] == "gpt-x")]
    assert rows["temperature"].tolist() == ["0.2", "0.7"]
    assert rows["copied rows"].tolist() == [
        "9/20, 8 distinct (p=1e-12)",
        "3/20, 2 distinct (p=1e-12)",
    ]
    assert rows["best n-gram match: samples"].tolist() == ["9.5", "9.5"]
    assert rows["best n-gram match: real rows"].tolist() == ["3.3", "3.3"]
    assert rows["copied values"].tolist() == ["87%", "87%"]
    assert not ((frame["dataset"] == "iris") & (frame["model"] == "gpt-x")).any()


def test_each_cell_is_traced_to_its_run(built):
    store, out, _, _ = built
    sources = pd.read_csv(out / "completion.sources.csv")
    row = sources[(sources["row"] == "iris") & (sources["column"] == "row: gpt-x")].iloc[0]
    assert row["run_id"] == store.ids[("gpt-x", "iris", "row_completion", "original")]
    overview = pd.read_csv(out / "overview.sources.csv")
    header = overview[
        (overview["row"] == "iris")
        & (overview["column"] == "header")
        & (overview["model"] == "gpt-x")
    ]
    assert header["run_id"].tolist() == [store.ids[("gpt-x", "iris", "header", "original")]]
    runs = pd.read_csv(out / "runs.csv")
    assert "failed" not in set(runs["verdict"])
    index = (out / "index.md").read_text()
    for name in ("overview.md", "fewshot_accuracy.tex", "samples_scatter_california-housing.png"):
        assert f"({name})" in index
    assert store.ids[("gpt-x", "synthetic-novel", "statistical_learning", "original")] in index
    assert "Language models: gpt-x, oracle-null." in index


def test_memorized_datasets_are_those_with_memorization_evidence(built):
    store, _, _, _ = built
    runs = PaperRuns.load(store.uri, [EXPERIMENT])
    assert memorization_status(runs, "gpt-x", "iris") == "memorized"
    assert memorization_status(runs, "oracle-null", "iris") == "not shown memorized"
    assert memorization_status(runs, "gpt-x", "wine") == "untested"


def test_any_test_of_rows_seen_marks_a_dataset_memorized(tmp_path):
    """The split follows the tests' claims: existence claims rows seen, feature names does not."""
    store = Store(tmp_path, "paper-unit-claims")
    store.log("gpt-x", "wine", "existence")
    store.log("gpt-x", "titanic", "feature_names")
    store.log("gpt-x", "titanic", "header", "no_evidence")
    runs = PaperRuns.load(store.uri, ["paper-unit-claims"])
    assert memorization_status(runs, "gpt-x", "wine") == "memorized"
    assert memorization_status(runs, "gpt-x", "titanic") == "not shown memorized"


def test_the_dataset_tables_list_datasets_of_every_test_that_reads_one():
    tests = tabular_tests()
    assert {"header", "fewshot_predict", "completion_choice", "min_k_prob"} <= set(tests)
    assert "statistical_learning" not in tests and "forecast" not in tests


def test_models_option_restricts_language_models_but_keeps_baselines(built, tmp_path):
    store, _, _, _ = built
    report = write_paper(store.uri, tmp_path, [EXPERIMENT], models=["oracle-null"])
    frame = frame_of(tmp_path, "fewshot_accuracy")
    assert set(frame["model"]) == {"LR"}  # oracle-null and GBT have no few-shot run here
    assert cell(frame, "original", dataset="iris", model="LR") == "0.90 ± 0.02"
    assert "gpt-x" not in (tmp_path / "overview.md").read_text()
    assert report.index.is_file()


def test_an_empty_experiment_writes_every_table_and_says_it_is_empty(built, tmp_path):
    store, _, _, _ = built
    report = write_paper(store.uri, tmp_path, ["no-such-experiment"])
    overview = frame_of(tmp_path, "overview")
    assert overview.empty and "header" in overview.columns
    assert "model=<model>" in (tmp_path / "overview.md").read_text()
    assert {f.name for f in report.figures} >= {"samples_scatter", "correlations"}
    said = report.said(1.0)
    assert said.startswith("0 tables and 0 figures with runs")
    assert "Empty, no run yet: overview, completion" in said
    assert "(empty: no run yet)" in report.index.read_text()


def test_what_is_written_counts_only_tables_and_figures_with_runs(built):
    _, _, report, _ = built
    said = report.said(1.0)
    full = sum(bool(t.run_ids) for t in report.tables)
    assert said.startswith(f"{full} tables and ")
    empty = [f.name for f in report.figures if not f.run_ids]
    for name in empty:
        assert name in said.split("Empty, no run yet: ", 1)[1]


def test_missing_cells_merge_into_one_sweep():
    missing = MissingCells("paper")
    missing.add("m1", "iris", "test=header", "transform=original")
    missing.add("m2", "wine", "test=first_token", "transform=original")
    missing.add("m1", "fico", "test=header", "transform=original")
    text = missing.footnote()
    assert (
        "`tabmem run -m model=m1,m2 dataset=iris,wine test=header,first_token "
        "transform=original experiment=paper`" in text
    )
    assert "User-provided datasets (fico)" in text


def test_feature_pair_and_correlation_matrix():
    data = pd.DataFrame(
        {"a": [1, 2, 3, 4], "b": [4, 3, 2, 1.5], "c": [1, 0, 1, 0], "d": list("wxyz")}
    )
    assert feature_pair(data) == ("a", "b")
    assert feature_pair(data.rename(columns={"c": "latitude", "a": "longitude"})) == (
        "longitude",
        "latitude",
    )
    pairs = pd.DataFrame({"feature_a": ["a"], "feature_b": ["b"], "data_r": [-0.5]})
    matrix = correlation_matrix(pairs, "data_r")
    assert matrix.to_numpy().tolist() == [[1.0, -0.5], [-0.5, 1.0]]


def grid_config(*overrides: str):
    from hydra import compose, initialize_config_dir

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


@pytest.mark.filterwarnings("ignore::UserWarning")  # hydra: launcher schema deprecation
def test_the_paper_grid_sweeps_every_part_over_the_paper_datasets():
    from tabmem.report.paper_runs import paper_datasets

    for grid in ("paper", "paper-small"):
        cfg = grid_config(f"+grid={grid}")
        params = cfg.hydra.sweeper.params
        parts = [p.strip() for p in params["+paper"].split(",")]
        conf = Path(__file__).resolve().parents[2] / "conf" / "paper"
        assert sorted(parts) == sorted(p.stem for p in conf.glob("*.yaml"))
        datasets = [d.strip() for d in params["dataset"].split(",")]
        assert set(datasets) <= set(paper_datasets())
        assert cfg.skip_unrunnable is True
    assert [
        d.strip() for d in grid_config("+grid=paper").hydra.sweeper.params["dataset"].split(",")
    ] == list(paper_datasets())


@pytest.mark.filterwarnings("ignore::UserWarning")  # hydra: launcher schema deprecation
def test_grid_skip_rule_names_the_reason():
    from tabmem.jobs import skip_reason

    cfg = grid_config("+paper=statistical-learning", "dataset=iris", "model=oracle-null")
    assert skip_reason(cfg, "statistical_learning") == ""  # only grids skip
    cfg = grid_config("+paper=statistical-learning", "dataset=iris", "+skip_unrunnable=true")
    assert skip_reason(cfg, "statistical_learning").startswith("this part of the grid runs on")
    cfg = grid_config("+paper=memorization", "dataset=fico", "+skip_unrunnable=true")
    assert skip_reason(cfg, "header").startswith("dataset file not present: Dataset 'fico'")
    cfg = grid_config("+paper=memorization", "model=logistic-regression", "+skip_unrunnable=true")
    assert "statistical baseline" in skip_reason(cfg, "header")
    assert skip_reason(cfg, "fewshot_predict") == ""


def test_the_sqlite_fast_path_reads_what_the_mlflow_client_reads(built):
    from tabmem.tracking.runs import client_frame, sqlite_frame

    store, _, _, _ = built
    slow = client_frame(store.uri, [EXPERIMENT]).sort_values("run_id").reset_index(drop=True)
    fast = sqlite_frame(sqlite_path(store.uri), [EXPERIMENT])
    fast = fast.sort_values("run_id").reset_index(drop=True)
    assert list(fast.columns[:13]) == list(slow.columns[:13])
    assert set(fast.columns) == set(slow.columns)
    pd.testing.assert_frame_equal(fast[slow.columns], slow, check_dtype=False)


def test_accuracy_difference_figure_has_rows_only_for_models_with_fewshot_runs(tmp_path):
    store = Store(tmp_path, "paper-unit-diff")
    accuracy = {"accuracy": 0.8, "accuracy_se": 0.04}
    store.log("model-a", "iris", "fewshot_predict", metrics=accuracy)
    store.log("logistic-regression", "iris", "fewshot_predict", metrics=accuracy)
    store.log("model-b", "iris", "header")
    figure = accuracy_difference_figure(PaperRuns.load(store.uri, ["paper-unit-diff"]))
    titles = [axis.get_title() for axis in figure.figure.axes]
    assert titles == ["model-a: memorized", "model-a: not shown memorized"]
    assert figure.run_ids == sorted(
        store.ids[(m, "iris", "fewshot_predict", "original")]
        for m in ("model-a", "logistic-regression")
    )
