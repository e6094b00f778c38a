"""In-context statistical learning: the synthetic problems, the sweeps, the paired references,
and the test end to end with scripted models."""

import re
from pathlib import Path

import numpy as np
from harness import settings_of
from sklearn.linear_model import LogisticRegression

from tabmem.battery.base import TestContext
from tabmem.battery.statistical_learning import (
    StatisticalLearning,
    StatisticalLearningSettings,
    reference_labels,
    settings,
)
from tabmem.data import Dataset, DatasetSpec
from tabmem.data.linear_problems import linear_problem
from tabmem.llm.baselines import BaselineBackend
from tabmem.llm.client import LanguageModel
from tabmem.results import Verdict
from tabmem.stats.classifiers import l2_logistic, random_search_logistic

PARAMS = settings_of(
    "statistical_learning",
    dimensions=[1, 4],
    fixed_shots=10,
    shots=[4, 10],
    fixed_dimension=2,
    n_problems=12,
    system_prompt="Label the point.",
)
TYPED = StatisticalLearningSettings.load(PARAMS)
ANY_DATASET = Dataset(DatasetSpec(name="any"), Path("any.csv"), "a\n1\n")


def test_problem_labels_follow_the_half_space_of_the_written_points():
    problem = linear_problem(3, 20, np.random.default_rng(7), decimals=2)
    direction = np.random.default_rng(7).standard_normal(3)  # drawn first
    points = np.vstack([problem.train_x, problem.test_x])
    assert np.array_equal(points, np.round(points, 2))
    labels = (points @ direction >= 0).astype(int)
    assert labels[:20].tolist() == problem.train_y.tolist() and labels[20] == problem.test_y
    assert problem.dimension == 3 and problem.train_x.shape == (20, 3)


def test_settings_join_both_sweeps_once():
    assert settings(TYPED) == [(1, 10), (2, 4), (2, 10), (4, 10)]


def test_examples_are_half_of_each_label_as_in_the_paper():
    for q in range(30):
        even = linear_problem(8, 20, np.random.default_rng(q))
        assert np.bincount(even.train_y).tolist() == [10, 10]
        odd = linear_problem(8, 5, np.random.default_rng(q))
        assert sorted(np.bincount(odd.train_y, minlength=2).tolist()) == [2, 3]
    tests = [linear_problem(8, 20, np.random.default_rng(q)).test_y for q in range(200)]
    assert 70 < sum(tests) < 130  # the point to label is not balanced, just drawn


def test_l2_logistic_solves_scikit_learns_objective_for_many_constants_at_once():
    problem = linear_problem(4, 30, np.random.default_rng(11))
    cs = np.array([0.01, 1.0, 10.0])
    theta = l2_logistic(problem.train_x, problem.train_y.astype(float), cs)
    for row, c in zip(theta, cs, strict=True):
        fitted = LogisticRegression(C=c, tol=1e-10, max_iter=10_000)
        fitted.fit(problem.train_x, problem.train_y)
        assert np.allclose(row, [*fitted.coef_[0], fitted.intercept_[0]], atol=1e-5)


def test_reference_logistic_regression_is_scale_free_and_picks_c_by_cross_validation():
    problem = linear_problem(8, 20, np.random.default_rng(5))
    rule = random_search_logistic(
        problem.train_x, problem.train_y, 7, 10, (0.001, 10.001), np.random.default_rng(1)
    )
    drawn = np.random.default_rng(1).uniform(0.001, 10.001, 10)
    assert rule.C in drawn.tolist()
    scaled = random_search_logistic(
        problem.train_x * 100, problem.train_y, 7, 10, (0.001, 10.001), np.random.default_rng(1)
    )
    points = np.random.default_rng(2).standard_normal((50, 8))
    assert scaled.C == rule.C
    assert (scaled.predict(points * 100) == rule.predict(points)).all()


def test_references_solve_an_easy_one_dimensional_problem():
    problem = linear_problem(1, 40, np.random.default_rng(3))
    labels = reference_labels(problem, TYPED, np.random.default_rng(0))
    assert labels == {
        "logistic_regression": str(problem.test_y),
        "nearest_neighbour": str(problem.test_y),
    }


class NearestNeighbour:
    """Answers with the label of the example closest to the question: a 1-NN in disguise."""

    def __init__(self):
        self.identity = {"provider": "test", "model": "1nn"}

    def chat(self, messages, params):
        def point(text):
            return np.array([float(v) for v in re.findall(r"= (-?\d+\.\d+)", text)])

        question = point(messages[-1]["content"])
        examples = [
            (point(u["content"]), a["content"])
            for u, a in zip(messages[1:-1:2], messages[2:-1:2], strict=True)
        ]
        return min(examples, key=lambda e: float(np.sum((e[0] - question) ** 2)))[1]

    def complete(self, prompt, params):
        return " 0"

    def count_tokens(self, text):
        return None

    def tokenize(self, text):
        return None

    def close(self):
        pass


def run(backend, form="chat", **params):
    model = LanguageModel(backend, "m", prompt_form=form, show_progress=False)
    return StatisticalLearning().run(TestContext(ANY_DATASET, model, {**PARAMS, **params}, 5))


def test_a_model_that_is_a_nearest_neighbour_matches_the_reference_exactly():
    result = run(NearestNeighbour())
    assert result.n_queries == 4 * 12
    assert result.rate == result.metrics["knn_accuracy"]
    for d, k in settings(TYPED):
        assert result.metrics[f"accuracy_d{d}_k{k}"] == result.metrics[f"knn_accuracy_d{d}_k{k}"]
    table = result.tables["curves.json"]
    assert len(table) == 4 * 3 and set(table["learner"]) == {
        "model",
        "logistic_regression",
        "nearest_neighbour",
    }
    assert (table["ci_low"] <= table["accuracy"]).all()
    assert (table["accuracy"] <= table["ci_high"]).all()
    assert "statistical_learning.png" in result.figures
    prompt = result.records[0].prompt
    assert prompt.startswith("[system]\nLabel the point.") and "THEN Y =" in prompt


def test_a_constant_answer_is_chance_and_no_evidence():
    result = run(NearestNeighbour(), form="completion", n_problems=30)
    assert result.verdict is Verdict.NO_EVIDENCE
    assert result.rate == sum(r.expected == "0" for r in result.records) / result.n_queries
    assert result.baseline == 0.5
    assert result.records[0].prompt.startswith("Label the point.\n\nIF X1 = ")


def test_few_problems_learnt_well_are_ambiguous_not_no_evidence():
    """The nearest neighbour on 2 problems per setting: far above chance, too few to tell."""
    result = run(NearestNeighbour(), n_problems=2)
    assert result.rate - 0.5 >= 0.05 and result.p_value >= 0.01
    assert result.verdict is Verdict.AMBIGUOUS
    assert "large but not significant" in result.reason


def test_a_baseline_model_is_fitted_on_each_problem():
    backend = BaselineBackend("logistic-regression", "logistic_regression", {})
    result = run(backend, n_problems=10)
    assert result.n_queries == 40 and result.info["prompt_form"] == "baseline"
    assert result.metrics["n_unparseable"] == 0
    assert result.rate > 0.7  # a linear rule learns a half-space
    majority = run(BaselineBackend("majority-class", "majority_class", {}), n_problems=10)
    assert majority.rate < result.rate


def test_problems_that_do_not_fit_the_context_are_skipped():
    model = LanguageModel(NearestNeighbour(), "m", context_window=50, show_progress=False)
    result = StatisticalLearning().run(TestContext(ANY_DATASET, model, PARAMS, 5))
    assert result.verdict is Verdict.NOT_APPLICABLE
