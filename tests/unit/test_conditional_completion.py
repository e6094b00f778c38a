"""Conditional completion's baseline is what a model of the distribution could answer."""

from __future__ import annotations

import random
from pathlib import Path

from harness import settings_of
from test_knowledge_tests import InProcessOracle

from tabmem.battery.base import TestContext, get_test
from tabmem.data import Dataset, DatasetSpec
from tabmem.llm.client import LanguageModel
from tabmem.llm.oracle import LearnerOracle, MemorizerOracle
from tabmem.results import Verdict


def towns_text(n_rows: int = 300) -> str:
    """Five regions of twelve towns each (the town follows the region; about five rows per
    town), a street unique to each row, and a floor count."""
    rng = random.Random(11)
    lines = ["region,town,street,floors"]
    for i in range(n_rows):
        region = rng.randrange(5)
        town = f"T{region}-{rng.randrange(12)}"
        lines.append(f"R{region},{town},S{i:04d},{rng.randint(1, 9)}")
    return "\n".join(lines) + "\n"


TOWNS = Dataset(spec=DatasetSpec(name="towns"), path=Path("towns.csv"), text=towns_text())
SETTINGS = settings_of(
    "conditional_completion",
    n_per_feature=20,
    features=["town", "street"],
    few_shot_pool=[],
    completion_prompt="Dataset: {dataset}\n{pairs}\n{feature} =",
)


def run(oracle):
    model = LanguageModel(InProcessOracle(oracle), "oracle", show_progress=False)
    return get_test("conditional_completion")(TestContext(TOWNS, model, SETTINGS, seed=0))


def test_a_model_of_the_distribution_does_not_beat_the_baseline():
    result = run(LearnerOracle([TOWNS]))
    rates = result.tables["feature_rates.json"].set_index("feature")
    assert rates.loc["town", "rate"] == 1.0  # every town it names follows the region somewhere
    assert rates.loc["town", "marginal"] < 0.35  # a marginal draw rarely does
    assert rates.loc["town", "baseline"] == 1.0  # the greedy answer does, without the row
    assert result.verdict is Verdict.NO_EVIDENCE, result.reason


def test_memory_of_the_rows_still_beats_it():
    result = run(MemorizerOracle([TOWNS]))
    rates = result.tables["feature_rates.json"].set_index("feature")
    assert rates.loc["street", "rate"] == 1.0
    # no street of the town can be inferred from the row itself; the copula, fitted without
    # the row, names another row's street of the same town on a quarter of the queries
    assert rates.loc["street", "baseline"] < 0.4
    assert result.verdict is Verdict.EVIDENCE, result.reason
    assert result.records[0].extra["greedy_answer"] != ""


def test_a_questions_data_only_answers_are_worked_out_once_for_all_models():
    from tabmem.battery.conditional_completion import PrefixFacts, Question
    from tabmem.stats.best_of import ValuePredictors
    from tabmem.stats.prefixes import PrefixIndex
    from tabmem.stats.samples import data_values

    rows = data_values(TOWNS)
    predictors = ValuePredictors(rows)
    facts = PrefixFacts(["region", "town", "street", "floors"], PrefixIndex(rows), predictors)
    asked = []
    chances = predictors.chances
    predictors.chances = lambda *args: asked.append(args) or chances(*args)  # type: ignore[method-assign]
    question = Question(7, 1, "", (rows[7][0],), rows[7][1])
    first = facts.baseline(question)
    assert facts.baseline(Question(7, 1, "", (rows[7][0],), rows[7][1])) is first
    assert len(asked) == 1
    assert first.greedy.startswith(f"T{rows[7][0][1]}-")  # a town of the shown region
    assert first.greedy_valid and 0 < first.marginal_chance < 0.35


def test_the_figure_takes_a_rate_a_rounding_error_past_its_interval():
    # a baseline's mean chance of 1 + 1e-15 beside its interval capped at 1 stopped a
    # calibration run (matplotlib refuses a negative error bar)
    from tabmem.battery.conditional_completion import FeatureRates, rates_figure

    rates = [FeatureRates("age", 1, 20, 20, 1.0, 0.83, 1.0, 1.0 + 1e-15, 1.0, 1.0, 0.9, 0.5)]
    figure = rates_figure(rates, "wine")
    assert len(figure.axes[0].containers) == 2  # both bars drawn
