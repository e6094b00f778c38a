"""Statistical baselines: the feature map, the three estimators, and baselines as models."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from harness import settings_of

from tabmem.battery.base import TestContext, inapplicable_reason
from tabmem.battery.fewshot_predict import FewshotPredict
from tabmem.data import Dataset, DatasetSpec
from tabmem.errors import ConfigError
from tabmem.llm.base import FIT, GenerationParams, Request
from tabmem.llm.baselines import BaselineBackend
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.registry import build_backend, build_model
from tabmem.results import Verdict
from tabmem.stats.classifiers import cv_folds, features, fit_predict

KINDS = {"x": "numeric", "g": "categorical", "id": "identifier"}


def frame(x, g, ids=None):
    return pd.DataFrame(
        {"x": x, "g": pd.Series(g, dtype=object), "id": ids or [str(i) for i in range(len(x))]}
    )


def test_features_impute_numbers_one_hot_categories_and_drop_identifiers():
    train = frame([1.0, np.nan, 3.0], ["a", "b", None])
    design = features(KINDS, scale=False).fit(train)
    out = design.transform(train)
    # x (median 2 for the gap), its missing indicator, one-hot a, b, (missing)
    assert out.tolist() == [[1, 0, 1, 0, 0], [2, 1, 0, 1, 0], [3, 0, 0, 0, 1]]
    unseen = design.transform(frame([5.0], ["zzz"]))
    assert unseen.tolist() == [[5, 0, 0, 0, 0]]  # an unseen category is all zeros


def test_cv_folds_never_exceed_the_rarest_class():
    assert cv_folds(["a"] * 10 + ["b"] * 3, 5) == 3
    assert cv_folds(["a"] * 10 + ["b"] * 30, 5) == 5


def test_logistic_regression_separates_a_separable_problem_and_reports_its_constant():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    labels = ["hi" if v > 0 else "lo" for v in x]
    train, test = frame(list(x[:150]), ["a"] * 150), frame(list(x[150:]), ["a"] * 50)
    fitted = fit_predict("logistic_regression", train, labels[:150], test, KINDS, seed=0)
    assert fitted.labels == labels[150:]
    assert fitted.info["C"] in (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)
    assert fitted.info["cv_folds"] == 5 and fitted.info["train_rows"] == 150


def test_gradient_boosted_tree_learns_an_interaction_that_a_linear_model_cannot():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, size=600)
    g = rng.choice(["a", "b"], size=600)
    labels = ["1" if (v > 0) == (c == "a") else "0" for v, c in zip(x, g, strict=True)]
    train, test = frame(list(x[:500]), list(g[:500])), frame(list(x[500:]), list(g[500:]))
    options = {"n_iter": 3, "cv_folds": 3}
    tree = fit_predict("gradient_boosted_tree", train, labels[:500], test, KINDS, 0, options)
    linear = fit_predict("logistic_regression", train, labels[:500], test, KINDS, 0)
    truth = np.array(labels[500:])
    assert (np.array(tree.labels) == truth).mean() > 0.9
    assert (np.array(linear.labels) == truth).mean() < 0.75
    assert {"max_depth", "reg_alpha", "reg_lambda", "cv_accuracy"} <= set(tree.info)


def test_majority_class_and_single_class_training():
    train = frame([1.0, 2.0, 3.0], ["a", "a", "b"])
    test = frame([9.0, 9.0], ["b", "b"])
    majority = fit_predict("majority_class", train, ["n", "y", "y"], test, KINDS, 0)
    assert majority.labels == ["y", "y"]
    single = fit_predict("logistic_regression", train, ["n", "n", "n"], test, KINDS, 0)
    assert single.labels == ["n", "n"]


def test_a_baseline_is_built_from_its_model_config():
    cfg = {"name": "logistic-regression", "backend": "baseline", "estimator": "logistic_regression"}
    backend = build_backend(cfg, Path("w"))
    assert isinstance(backend, BaselineBackend) and backend.estimator == "logistic_regression"
    model = build_model(cfg, None, Path("w"), show_progress=False)
    assert model.capabilities == {FIT}
    with pytest.raises(ConfigError, match="estimator 'svm'"):
        build_backend({**cfg, "estimator": "svm"}, Path("w"))


def test_prompting_a_baseline_gives_failed_queries_that_say_why():
    model = build_model(
        {"name": "majority-class", "backend": "baseline", "estimator": "majority_class"},
        None,
        Path("w"),
        show_progress=False,
    )
    responses = model.run([Request(params=GenerationParams(max_tokens=4), prompt="x")])
    assert "statistical baseline" in responses[0].error
    assert "test=fewshot_predict" in inapplicable_reason("header", model)
    assert inapplicable_reason("fewshot_predict", model) == ""
    assert inapplicable_reason("statistical_learning", model) == ""


def test_fewshot_predict_fits_a_baseline_on_the_rows_outside_each_block():
    text = "x,g,label\n" + "".join(
        f"{x},{'ab'[x % 2]},{'yes' if x > 40 else 'no'}\n" for x in range(1, 61)
    )
    dataset = Dataset(DatasetSpec(name="tiny", target="label"), Path("t.csv"), text)
    params = settings_of("fewshot_predict", n_test_rows=30, max_test_fraction=0.25)
    results = {}
    for estimator in ("logistic_regression", "majority_class"):
        backend = BaselineBackend(estimator, estimator, {})
        model = LanguageModel(backend, estimator, show_progress=False)
        results[estimator] = FewshotPredict().run(TestContext(dataset, model, params, seed=2))
    lr, majority = results["logistic_regression"], results["majority_class"]
    assert lr.rate >= 0.9 and lr.verdict is Verdict.EVIDENCE
    assert majority.rate == majority.baseline and majority.verdict is Verdict.NO_EVIDENCE
    assert lr.n_queries == majority.n_queries == 30
    assert lr.records[0].prompt.startswith("IF x = ") and lr.info["prompt_form"] == "baseline"
    assert lr.all_metrics()["n_failed_queries"] == 0


def test_a_fit_is_kept_in_the_response_cache_and_read_back_the_same(tmp_path):
    text = "x,label\n" + "".join(f"{x},{'yes' if x > 20 else 'no'}\n" for x in range(1, 41))
    dataset = Dataset(DatasetSpec(name="line", target="label"), Path("l.csv"), text)
    params = settings_of("fewshot_predict", n_test_rows=10, max_test_fraction=0.25)
    backend = BaselineBackend("lr", "logistic_regression", {})
    results = []
    for _ in range(2):
        cache = ResponseCache(tmp_path / "cache.sqlite")
        model = LanguageModel(backend, "lr", cache=cache, show_progress=False)
        results.append(FewshotPredict().run(TestContext(dataset, model, params, seed=2)))
        results[-1].metrics["cache_hits"] = model.stats.cache_hits
        cache.close()
    first, second = results
    assert first.metrics["cache_hits"] == 0 and second.metrics["cache_hits"] >= 1
    assert [r.completion for r in first.records] == [r.completion for r in second.records]
    assert [r.extra["fit"] for r in first.records] == [r.extra["fit"] for r in second.records]
    cache = ResponseCache(tmp_path / "cache.sqlite")
    model = LanguageModel(backend, "lr", cache=cache, show_progress=False)
    FewshotPredict().run(TestContext(dataset, model, params, seed=3))
    cache.close()
    assert model.stats.cache_hits == 0  # another seed draws other blocks: other fits
