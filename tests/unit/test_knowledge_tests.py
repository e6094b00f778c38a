"""The knowledge and learning tests end to end on a hand-made dataset, with the reference
models run in-process (no server) and a model whose queries fail."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml
from harness import settings_of
from matplotlib.figure import Figure

from tabmem.battery.base import TestContext, get_test
from tabmem.data import Dataset, DatasetSpec
from tabmem.llm.client import LanguageModel
from tabmem.llm.oracle import (
    LearnerOracle,
    MarginalOracle,
    MemorizerOracle,
    NullOracle,
    last_user_text,
)
from tabmem.results import TestResult, Verdict


def orchard_text(n_rows: int = 120) -> str:
    """Trees: a unique tag, a kind and a soil with clear modes, an integer age (most often 12),
    a height that grows with age and a one-decimal width that shrinks with height."""
    rng = random.Random(5)
    lines = ["tag,kind,soil,age,height,width"]
    for i in range(n_rows):
        kind = rng.choices(["apple", "pear", "plum"], [0.6, 0.3, 0.1])[0]
        soil = rng.choices(["loam", "clay", "sand"], [0.7, 0.2, 0.1])[0]
        age = 12 if rng.random() < 0.4 else rng.randint(1, 30)
        height = 1.5 + 0.3 * age + rng.gauss(0, 1)
        width = max(0.5, 12 - 0.5 * height + rng.gauss(0, 0.5))
        lines.append(f"T{1000 + i},{kind},{soil},{age},{height:.2f},{width:.1f}")
    return "\n".join(lines) + "\n"


ORCHARD = Dataset(
    spec=DatasetSpec(name="orchard", aliases=("Orchard Trees",), family="orchard"),
    path=Path("orchard.csv"),
    text=orchard_text(),
)

SETTINGS = {
    "sample": {
        "n_samples": 40,
        "temperature": 0.7,
        "chance_draws": 500,
        "real_rows": 60,
        "observation_prompt": "Dataset: {dataset}\nColumns: {features}\nRecord:",
        "few_shot_pool": [],
    },
    "feature_names": {"names_prompt": "Dataset: {dataset}\nHeader:\n{prefix}"},
    "dataset_name": {
        "row_counts": [3, 6],
        "name_prompt": "{rows}\nWhat is the name of this dataset?",
    },
    "conditional_completion": {
        "n_per_feature": 8,
        "completion_prompt": "Dataset: {dataset}\n{pairs}\n{feature} =",
    },
    "conditional_distribution": {"permutations": 199},
}
SAMPLER = {**SETTINGS["sample"], "temperature": 0.0}
SETTINGS["feature_values"] = {"sampler": SAMPLER}
SETTINGS["feature_distribution"] = {"sampler": SAMPLER}
SETTINGS["conditional_distribution"]["sampler"] = SETTINGS["sample"]


class InProcessOracle:
    """A reference model answered in this process, as the server would answer it."""

    def __init__(self, oracle) -> None:
        self.oracle = oracle
        self.identity = {"provider": "test", "model": oracle.model_name}

    def chat(self, messages, params):
        prompt = last_user_text(messages) or ""
        return self._answer(prompt, params, chat=True)

    def complete(self, prompt, params):
        return self._answer(prompt, params, chat=False)

    def _answer(self, prompt, params, chat):
        return self.oracle.generate(
            prompt, params.max_tokens, params.stop, params.seed, params.temperature, chat=chat
        )

    def count_tokens(self, text):
        return None

    def tokenize(self, text):
        return None

    def close(self):
        pass


class FailingBackend(InProcessOracle):
    """The memorizer, except that every third query fails."""

    def __init__(self) -> None:
        super().__init__(MemorizerOracle([ORCHARD]))
        self.calls = 0

    def _answer(self, prompt, params, chat):
        self.calls += 1
        if self.calls % 3 == 0:
            raise RuntimeError("connection reset")
        return super()._answer(prompt, params, chat)


ORACLES = {
    "memorizer": MemorizerOracle([ORCHARD]),
    "marginal": MarginalOracle([ORCHARD]),
    "null": NullOracle([ORCHARD]),
    "learner": LearnerOracle([ORCHARD]),
}


def run(test: str, oracle: str = "memorizer", form: str = "chat", backend=None) -> TestResult:
    backend = backend or InProcessOracle(ORACLES[oracle])
    model = LanguageModel(backend, oracle, prompt_form=form, show_progress=False)
    params = settings_of(test, **SETTINGS.get(test, {}))
    if "few_shot_pool" in params:
        params["few_shot_pool"] = []
    return get_test(test)(TestContext(ORCHARD, model, params, seed=0))


def verdicts(test: str) -> dict[str, Verdict]:
    return {name: run(test, name).verdict for name in ORACLES}


def assert_loggable(result: TestResult) -> None:
    """What the runner writes must serialise: numbers as plain floats, info as YAML."""
    summary = {"metrics": result.all_metrics(), "info": result.info}
    yaml.safe_dump(summary)
    assert all(isinstance(v, int | float) for v in result.all_metrics().values())


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ("feature_names", ("evidence", "evidence", "no_evidence", "evidence")),
        ("dataset_name", ("evidence", "evidence", "no_evidence", "evidence")),
        ("feature_values", ("evidence", "evidence", "no_evidence", "evidence")),
        ("feature_distribution", ("evidence", "evidence", "no_evidence", "ambiguous")),
        ("sample", ("evidence", "no_evidence", "no_evidence", "no_evidence")),
        ("conditional_distribution", ("evidence", "no_evidence", "no_evidence", "evidence")),
        ("conditional_completion", ("evidence", "no_evidence", "no_evidence", "no_evidence")),
    ],
)
def test_reference_models_get_the_verdicts_their_knowledge_allows(test, expected):
    """Memorizer, marginal, null, learner: the learner knows how values go together but no
    row, so the tests of knowledge find it and the tests of rows seen must not. (Its 40 draws
    copy no row but lie closer to real rows than real rows lie to each other: the sample test
    reports that closeness and does not decide on it.)"""
    found = verdicts(test)
    assert tuple(found[name].value for name in ORACLES) == expected, found


def test_feature_names_scores_names_in_order():
    result = run("feature_names")
    assert result.metrics["names_shown"] == 1
    assert result.metrics["names_remaining"] == 5
    assert result.metrics["names_in_order"] == 5
    assert result.records[0].extra["names_given"] == ["kind", "soil", "age", "height", "width"]
    assert result.records[0].prompt.endswith("Header:\ntag,")


def test_dataset_name_counts_control_queries_apart():
    result = run("dataset_name")
    assert result.metrics["tested_queries"] == 2
    assert result.n_hits == 2 and result.rate == 1.0


def test_sample_reports_copies_best_matches_and_known_values():
    memorizer, marginal = run("sample"), run("sample", "marginal")
    assert memorizer.metrics["copies"] == 40 and memorizer.metrics["best_match_samples"] == 6
    assert memorizer.metrics["best_match_real_rows"] < 6  # every tag is unique
    assert marginal.metrics["known_value_share"] == 1.0
    assert marginal.metrics["best_match_samples"] < memorizer.metrics["best_match_samples"]
    table = memorizer.tables["samples.json"]
    assert len(table) == 40 and table["complete"].all()
    assert list(table.columns[-6:]) == ["tag", "kind", "soil", "age", "height", "width"]
    assert_loggable(memorizer)


def test_null_samples_are_counted_as_invalid_not_failed():
    result = run("sample", "null")
    assert result.metrics["samples_invalid"] == 40
    assert result.metrics["samples_complete"] == 0
    assert result.all_metrics()["n_failed_queries"] == 0
    assert result.info["invalid_samples"] == {"no feature = value pairs": 40}


def test_feature_values_and_distribution_tables():
    values = run("feature_values", "marginal")
    table = values.tables["feature_formats.json"].set_index("feature")
    assert table.loc["width", "format"].startswith("number from ")
    assert table.loc["width", "format"].endswith(" with 1 decimals")
    assert table.loc["kind", "kind"] == "categorical"
    assert (table["rate"] == 1.0).all()
    modes = run("feature_distribution", "marginal").tables["feature_modes.json"]
    assert set(modes["feature"]) == {"kind", "soil", "age", "height", "width"}  # tags: unique
    assert modes.set_index("feature").loc["kind", "data_modes"] == "apple"
    assert_loggable(values)


def test_conditional_distribution_draws_a_heat_map_and_pairs():
    result = run("conditional_distribution")
    assert isinstance(result.figures["correlations.png"], Figure)
    pairs = result.tables["correlation_pairs.json"]
    assert len(pairs) == 3  # age, height, width
    assert result.metrics["recovery"] > 0.5
    assert_loggable(result)


def test_too_few_samples_is_no_evidence_with_the_data_heat_map():
    result = run("conditional_distribution", "null")
    assert result.verdict is Verdict.NO_EVIDENCE
    assert result.reason.startswith("0 samples have every numeric feature as a number")
    assert isinstance(result.figures["correlations.png"], Figure)
    assert result.metrics["samples_invalid"] == 40


def test_conditional_completion_rates_per_feature_with_a_figure():
    result = run("conditional_completion")
    rates = result.tables["feature_rates.json"]
    assert list(rates["feature"]) == ["kind", "soil", "age", "height", "width"]
    assert (rates["rate"] == 1.0).all()
    assert (rates["baseline"] < 1.0).all()
    assert isinstance(result.figures["conditional_completion.png"], Figure)
    assert result.n_queries == 40
    assert_loggable(result)


@pytest.mark.parametrize(
    "test", ["feature_names", "dataset_name", "sample", "conditional_completion"]
)
def test_completion_form_works_too(test):
    result = run(test, form="completion")
    assert result.verdict is Verdict.EVIDENCE, result.reason
    assert not result.records[0].prompt.startswith("[")


def test_failed_queries_count_as_misses_and_never_crash():
    result = run("conditional_completion", backend=FailingBackend())
    failed = [r for r in result.records if r.error]
    assert 10 <= len(failed) < result.n_queries  # equal queries are sent once and share a fate
    assert all(r.score == 0.0 and r.extra["answer"] == "" for r in failed)
    assert result.all_metrics()["n_failed_queries"] == len(failed)
    draw = run("feature_values", backend=FailingBackend())
    assert draw.metrics["samples_failed_queries"] == 13  # 40 distinct queries, every third fails
    assert draw.tables["samples.json"]["problem"].tolist().count("query failed") == 13


def test_the_same_seed_gives_the_same_queries():
    first, second = run("sample", "marginal"), run("sample", "marginal")
    assert [r.prompt for r in first.records] == [r.prompt for r in second.records]
    assert [r.completion for r in first.records] == [r.completion for r in second.records]


class PlausibleBackend(InProcessOracle):
    """Writes orchard-like observations: right categories, numbers with the right decimals but
    drawn from a plausible-looking range, not the file's."""

    def __init__(self) -> None:
        super().__init__(NullOracle([ORCHARD]))

    def _answer(self, prompt, params, chat):
        rng = random.Random(f"{params.seed}:{prompt}")
        return (
            f"tag = T{rng.randint(1000, 9999)}, kind = apple, soil = loam, "
            f"age = {rng.randint(1, 99)}, height = {rng.uniform(0, 40):.2f}, "
            f"width = {rng.uniform(0, 30):.1f}"
        )


def test_feature_values_separates_knowing_the_file_from_writing_plausible_numbers():
    knows = run("feature_values", "learner")
    guesses = run("feature_values", backend=PlausibleBackend())
    assert knows.verdict is Verdict.EVIDENCE, knows.reason
    assert guesses.verdict is not Verdict.EVIDENCE, guesses.reason
    rates = guesses.tables["feature_formats.json"].set_index("feature")["rate"]
    assert rates["kind"] == 1.0 and rates["width"] < 0.6


class SeedRecorder(InProcessOracle):
    """The null oracle, noting the seed of every request."""

    def __init__(self) -> None:
        super().__init__(NullOracle([ORCHARD]))
        self.seeds: list[int] = []

    def _answer(self, prompt, params, chat):
        self.seeds.append(params.seed)
        return super()._answer(prompt, params, chat)


def test_runs_at_two_seeds_share_no_sample_query_seed():
    """A reference model answers a repeated question by its seed alone: with overlapping
    query seeds, runs at seeds 0 and 1 had 39 of their 40 query seeds in common."""
    seeds = {}
    for run_seed in (0, 1):
        recorder = SeedRecorder()
        model = LanguageModel(recorder, "null", prompt_form="chat", show_progress=False)
        params = {**settings_of("sample", **SETTINGS["sample"]), "few_shot_pool": []}
        get_test("sample")(TestContext(ORCHARD, model, params, seed=run_seed))
        seeds[run_seed] = recorder.seeds
    assert len(seeds[0]) == len(set(seeds[0])) == 40
    assert not set(seeds[0]) & set(seeds[1])
    assert all(0 <= s < 2**31 for s in seeds[0] + seeds[1])
