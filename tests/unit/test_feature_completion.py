"""Feature completion on hand-made files: feature choice, baseline, verdicts."""

import random
import re
from pathlib import Path

import pytest
from harness import settings_of

from tabmem.battery.base import TestContext
from tabmem.battery.feature_completion import FeatureCompletion, question
from tabmem.data import Dataset, DatasetSpec
from tabmem.errors import ConfigError
from tabmem.llm.client import LanguageModel
from tabmem.llm.oracle import LearnerOracle, MemorizerOracle, last_user_text
from tabmem.results import Verdict

RNG = random.Random(3)
CODES = RNG.sample(range(10_000, 99_999), 60)
COLORS = ["red", "blue", "green", "grey", "pink", "teal"]
# every (color, size) pair occurs once, so the other features name the row
TEXT = "color,code,size\n" + "".join(
    f"{COLORS[i // 10]},{c},{i % 10}\n" for i, c in enumerate(CODES)
)


def table(text):
    lines = text.strip().split("\n")
    names = lines[0].split(",")
    return [dict(zip(names, line.split(","), strict=True)) for line in lines[1:]]


class Script:
    """Answers from the row that matches the given values, or always ``12345``."""

    def __init__(self, text, truthful):
        self.rows, self.truthful = table(text), truthful
        self.identity = {"provider": "test", "model": str(truthful)}

    def complete(self, prompt, params):
        if not self.truthful:
            return " 12345"
        given = dict(re.findall(r"^(\w+) = (.+)$", prompt, re.M))
        asked = prompt.rstrip(" =").split("\n")[-1]
        row = next(r for r in self.rows if all(r[k] == v for k, v in given.items()))
        return " " + row[asked]

    def chat(self, messages, params):
        return self.complete(messages[-1]["content"], params).strip()

    def count_tokens(self, text):
        return None

    def tokenize(self, text):
        return None

    def close(self):
        pass


def run(truthful=True, text=TEXT, form="completion", **params):
    model = LanguageModel(Script(text, truthful), "m", prompt_form=form, show_progress=False)
    dataset = Dataset(spec=DatasetSpec(name="t", family="t"), path=Path("t.csv"), text=text)
    settings = settings_of("feature_completion", few_shot_pool=[], n_queries=20, **params)
    return FeatureCompletion().run(TestContext(dataset, model, settings, seed=4))


def test_question_lists_other_features_and_ends_with_the_asked_one():
    columns = {"a": ["1", "2"], "b": ["x", "y"], "c": ["p", "q"]}
    asked = question(columns, 1, "b")
    assert asked.prompt == "a = 2\nc = q\nb ="
    assert asked.answer == "y"


@pytest.mark.parametrize("form", ["completion", "chat"])
def test_memory_of_the_unique_feature_is_evidence(form):
    result = run(form=form)
    assert result.info["feature"] == "code"
    assert result.metrics["unique_fraction"] == 1.0
    assert result.verdict is Verdict.EVIDENCE
    assert result.n_hits == 20
    # 60 distinct codes: a marginal draw matches with 60 * (1/60)^2 = 1/60, the mode too
    assert result.baseline == pytest.approx(1 / 60)


def test_a_fixed_guess_is_no_evidence():
    result = run(truthful=False)
    assert result.verdict is Verdict.NO_EVIDENCE
    assert result.n_hits == 0


def test_named_feature_is_used_and_its_baseline_is_its_mode():
    sizes = [row["size"] for row in table(TEXT)]
    mode_share = max(sizes.count(s) for s in set(sizes)) / len(sizes)
    result = run(feature="size")
    assert result.info["feature"] == "size"
    assert result.metrics["baseline_mode"] == pytest.approx(mode_share)


def test_no_unique_feature_is_not_applicable_with_a_reason():
    text = "color,size\n" + "".join(f"{c},{s}\n" for c in ["red", "blue"] for s in "1234" * 5)
    result = run(text=text)
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert "unique enough" in result.reason


def test_unknown_feature_is_a_clear_error():
    with pytest.raises(ConfigError, match="no feature 'weight'"):
        run(feature="weight")


def post_text() -> str:
    """300 letters: in 50 cities every letter has the city's zip, in 50 others each letter has
    its own; a street unique to each letter; a floor count."""
    rng = random.Random(8)
    lines = ["city,zip,street,floors"]
    for i in range(300):
        city = i % 100
        zip_code = 10_000 + city if city < 50 else 20_000 + i
        lines.append(f"C{city:03d},{zip_code},S{i:04d},{rng.randint(1, 9)}")
    return "\n".join(lines) + "\n"


def run_oracle(oracle_class, text, **params):
    class InProcess:
        def __init__(self, dataset):
            self.oracle = oracle_class([dataset])
            self.identity = {"provider": "test", "model": oracle_class.model_name}

        def chat(self, messages, params):
            prompt = last_user_text(messages) or ""
            return self.oracle.generate(prompt, params.max_tokens, params.stop, 0, chat=True)

        def count_tokens(self, text):
            return None

        def tokenize(self, text):
            return None

        def close(self):
            pass

    dataset = Dataset(spec=DatasetSpec(name="post"), path=Path("post.csv"), text=text)
    model = LanguageModel(InProcess(dataset), "oracle", show_progress=False)
    settings = settings_of("feature_completion", few_shot_pool=[], n_queries=40, **params)
    return FeatureCompletion().run(TestContext(dataset, model, settings, seed=4))


def test_a_value_the_other_features_give_away_is_in_the_baseline():
    learned = run_oracle(LearnerOracle, post_text(), feature="zip")
    assert 0.35 <= learned.metrics["baseline_predictor"] <= 0.65  # half the zips follow the city
    assert learned.rate == pytest.approx(learned.metrics["baseline_predictor"])
    assert learned.verdict is Verdict.NO_EVIDENCE, learned.reason
    recalled = run_oracle(MemorizerOracle, post_text(), feature="zip")
    assert recalled.rate == 1.0
    assert recalled.verdict is Verdict.EVIDENCE, recalled.reason


def test_a_feature_the_others_predict_too_well_is_not_applicable():
    text = "city,zip,floors\n" + "".join(
        f"C{i % 100:03d},{10_000 + i % 100},{i % 7}\n" for i in range(300)
    )
    result = run_oracle(
        __import__("tabmem.llm.oracle").llm.oracle.LearnerOracle, text, feature="zip"
    )
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert "baseline gets zip right at a rate of 1.000" in result.reason
    assert result.info["predictor_accuracy"] == 1.0


def test_the_copula_learner_never_beats_the_per_query_baseline():
    from tabmem.llm.oracle import CopulaOracle

    result = run_oracle(CopulaOracle, post_text(), feature="zip")
    assert result.n_hits <= round(result.baseline * result.n_queries)
    assert result.verdict is Verdict.NO_EVIDENCE, result.reason
    assert "copula conditional" in result.reason
    assert result.info["baseline_set_by"]
