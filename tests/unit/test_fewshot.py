"""Few-shot prediction: label parsing, sampling, accuracy statistics and the test end to end
on a hand-made table with scripted models."""

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from harness import settings_of

from tabmem.battery.base import TestContext
from tabmem.battery.fewshot_predict import (
    FewshotPredict,
    FewshotPredictSettings,
    decide,
    example_plan,
    majority_hits,
    system_prompt,
)
from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.data.prediction import PredictionData
from tabmem.data.splits import Block, allocate, holdout_blocks, stratified_sample
from tabmem.data.transforms import apply_transform
from tabmem.errors import TransientProviderError
from tabmem.llm.base import GenerationParams
from tabmem.llm.client import LanguageModel, RetryPolicy
from tabmem.prompts.ifthen import IfThenFormat, ifthen_request
from tabmem.results import Verdict
from tabmem.stats.accuracy import Accuracy, p_above, wilson_interval
from tabmem.stats.labels import parse_label

# 60 rows: x = 1..60, a category g, label "yes" exactly when x > 40 (a third of the rows).
TEXT = "x,g,label\n" + "".join(
    f"{x},{'ab'[x % 2]},{'yes' if x > 40 else 'no'}\n" for x in range(1, 61)
)
PARAMS = settings_of(
    "fewshot_predict",
    n_shots=6,
    n_test_rows=30,
    max_test_fraction=0.25,
    system_prompts={
        "named": "Records of {dataset} ({description}). {task}",
        "task": "Records. {task}",
        "plain": "Predict {target}.",
    },
    prompt_style={"original": "named", "perturbed": "task", "statistical": "plain"},
    default_task="Predict {target}.",
)
TYPED = FewshotPredictSettings.load(PARAMS)


def tiny(text=TEXT, target="label"):
    spec = DatasetSpec(
        name="tiny", target=target, aliases=("Tiny Table",), description="made up rows"
    )
    return Dataset(spec=spec, path=Path("tiny.csv"), text=text)


class Scripted:
    """Answers from the question's x: truthfully, always 'no', with junk, or failing."""

    def __init__(self, mode):
        self.mode = mode
        self.identity = {"provider": "test", "model": mode}
        self.seen = []

    def answer(self, question):
        self.seen.append(question)
        x = int(re.search(r"x = (\d+)", question.splitlines()[-1])[1])
        truth = "yes" if x > 40 else "no"
        if self.mode == "fail" and x % 3 == 0:
            raise TransientProviderError("busy")
        return {
            "truth": truth,
            "named": f"x = {x}, label = {truth}",
            "no": "no",
            "junk": "I cannot tell.",
        }.get(self.mode, truth)

    def chat(self, messages, params):
        return self.answer(messages[-1]["content"])

    def complete(self, prompt, params):
        return " " + self.answer(prompt)

    def count_tokens(self, text):
        return None

    def tokenize(self, text):
        return None

    def close(self):
        pass


def run(mode="truth", form="chat", dataset=None, **params):
    backend = Scripted(mode)
    model = LanguageModel(
        backend, "m", prompt_form=form, show_progress=False, retry=RetryPolicy(max_retries=0)
    )
    ctx = TestContext(dataset or tiny(), model, {**PARAMS, **params}, seed=1)
    return FewshotPredict().run(ctx), backend


@pytest.mark.parametrize(
    ("answer", "label"),
    [
        ("Iris-setosa", "Iris-setosa"),
        ("  iris-SETOSA.\n", "Iris-setosa"),
        ('"Iris-virginica"', "Iris-virginica"),
        ("species = Iris-versicolor", "Iris-versicolor"),
        ("sepal_length = 5.1, species = Iris-setosa", "Iris-setosa"),
        ("The flower is an Iris-virginica.", "Iris-virginica"),
        ("```\nIris-setosa\n```", "Iris-setosa"),
        ("Iris-setosa or Iris-virginica", None),
        ("a rose", None),
        ("", None),
    ],
)
def test_parse_label_reads_the_answer(answer, label):
    labels = ["Iris-setosa", "Iris-versicolor", "Iris-virginica"]
    assert parse_label(answer, labels, "species") == label


def test_parse_label_handles_numbers_and_labels_inside_labels():
    assert parse_label("1.0", ["0", "1"], "Y") == "1"
    assert parse_label("Y = 0", ["0", "1"], "Y") == "0"
    assert parse_label("0.53", ["0", "1"], "Y") is None
    assert parse_label("Not Survived", ["Survived", "Not Survived"], "s") == "Not Survived"
    assert parse_label(">50K", ["<=50K", ">50K"], "Income") == ">50K"


def test_allocation_follows_label_frequencies_by_largest_remainder():
    assert allocate(Counter(no=70, yes=30), 20) == {"no": 14, "yes": 6}
    assert allocate(Counter(a=50, b=50, c=50), 20) == {"a": 7, "b": 7, "c": 6}
    assert allocate(Counter(a=9, b=1), 20) == {"a": 9, "b": 1}  # never more than there are
    assert allocate(Counter(a=97, b=3), 20) == {"a": 19, "b": 1}  # 19.4 / 0.6


def test_stratified_sample_is_seeded_and_draws_from_the_pool_only():
    labels = ["no"] * 70 + ["yes"] * 30
    pool = list(range(0, 100, 2))  # 35 "no", 15 "yes"
    first = stratified_sample(labels, pool, 10, np.random.default_rng(4))
    assert first == stratified_sample(labels, pool, 10, np.random.default_rng(4))
    assert len(set(first)) == 10 and set(first) <= set(pool)
    assert Counter(labels[i] for i in first) == {"no": 7, "yes": 3}


def test_holdout_blocks_never_train_on_their_own_rows():
    blocks = holdout_blocks(100, 40, 0.15, seed=3)
    assert [len(b.test) for b in blocks] == [15, 15, 10]
    tested = [i for b in blocks for i in b.test]
    assert len(set(tested)) == 40
    for block in blocks:
        assert set(block.train) == set(range(100)) - set(block.test)
    assert blocks == holdout_blocks(100, 40, 0.15, seed=3)
    assert len([i for b in holdout_blocks(10, 50, 0.2, 0) for i in b.test]) == 9  # n - 1


def test_accuracy_statistics_by_hand():
    acc = Accuracy(8, 10)
    assert acc.rate == 0.8
    assert acc.standard_error == pytest.approx(0.126491, abs=1e-6)  # sqrt(.8 * .2 / 10)
    # Wilson: centre (0.8 + z²/20) / (1 + z²/10) = 0.716738, half-width
    # z sqrt(0.016 + z²/400) / (1 + z²/10) = 0.226576, with z = 1.959964
    assert acc.interval == pytest.approx((0.49016, 0.94332), abs=1e-5)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.277533), abs=1e-6)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0
    assert p_above(8, 10, 0.5) == pytest.approx(56 / 1024)  # (45 + 10 + 1) / 2**10
    assert p_above(0, 10, 0.5) == 1.0


def test_verdict_rule():
    assert decide(Accuracy(90, 100), 0.6, 1e-9, 0.01, 0.05)[0] is Verdict.EVIDENCE
    assert decide(Accuracy(63, 100), 0.6, 1e-3, 0.01, 0.05)[0] is Verdict.AMBIGUOUS
    assert decide(Accuracy(62, 100), 0.6, 0.4, 0.01, 0.05)[0] is Verdict.NO_EVIDENCE


def test_large_but_not_significant_is_ambiguous_as_in_every_other_test():
    """Few rows: 7 of 8 right over a majority rate of 0.5 is a large gap, not significant."""
    verdict, reason = decide(Accuracy(7, 8), 0.5, 0.035, 0.01, 0.1)
    assert verdict is Verdict.AMBIGUOUS
    assert "large but not significant" in reason


def test_ifthen_question_and_both_prompt_forms():
    fmt = IfThenFormat("IF {features}, THEN {target} =", "{name} = {value}", ", ")
    question = fmt.ask(["a", "b", "c"], ["1", "", "x"], "t")
    assert question == "IF a = 1, c = x, THEN t ="
    params = GenerationParams(max_tokens=4)
    chat = ifthen_request(True, "sys", [("q1", "A"), ("q2", "B")], "q3", params)
    assert [m["role"] for m in chat.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert chat.messages[2]["content"] == "A" and chat.messages[-1]["content"] == "q3"
    plain = ifthen_request(False, "sys", [("q1", "A")], "q3", params)
    assert plain.prompt == "sys\n\nq1 A\nq3"


def test_truthful_model_predicts_every_row_and_is_evidence():
    result, _ = run("truth")
    assert result.n_queries == 30 and result.n_hits == 30 and result.rate == 1.0
    assert result.verdict is Verdict.EVIDENCE
    assert result.metrics["n_unparseable"] == 0 and result.metrics["n_blocks"] == 2
    assert result.metrics["accuracy_ci_low"] == pytest.approx(wilson_interval(30, 30)[0])
    assert result.p_value < 1e-6
    first = result.records[0]
    assert first.prompt.startswith("[system]\nRecords of Tiny Table (made up rows).")
    assert first.prompt.count("[assistant]") == 6  # n_shots examples
    assert first.prompt.rstrip().endswith("THEN label =")


def test_the_majority_class_is_the_baseline_and_no_evidence():
    result, _ = run("no")
    assert result.rate == result.baseline  # always "no" is exactly the majority rule
    assert result.verdict is Verdict.NO_EVIDENCE
    assert result.baseline == pytest.approx(
        sum(1 for r in result.records if r.expected == "no") / 30
    )


def test_named_answers_are_read_and_junk_is_unparseable_not_failed():
    named, _ = run("named")
    assert named.rate == 1.0
    junk, _ = run("junk")
    assert junk.n_hits == 0 and junk.metrics["n_unparseable"] == 30
    assert junk.all_metrics()["n_failed_queries"] == 0  # a wrong answer, not a failed query
    assert junk.tables["confusion.json"]["(unparseable)"].sum() == 30


def test_failed_queries_count_as_wrong_and_are_recorded():
    result, _ = run("fail")
    failed = [r for r in result.records if r.error]
    assert failed and all(r.score == 0.0 for r in failed)
    assert result.n_hits == 30 - len(failed)
    assert result.all_metrics()["n_failed_queries"] == len(failed)


def test_completion_form_writes_examples_as_lines_finished_by_their_label():
    result, _ = run("truth", form="completion")
    assert result.rate == 1.0
    prompt = result.records[0].prompt
    lines = prompt.split("\n")
    assert lines[0].startswith("Records of Tiny Table")
    example = r"IF x = \d+, g = [ab], THEN label = (yes|no)"
    assert all(re.fullmatch(example, line) for line in lines[2:-1])
    assert lines[-1].endswith("THEN label =")


def test_same_seed_same_prompts():
    assert [r.prompt for r in run()[0].records] == [r.prompt for r in run()[0].records]


def test_perturbed_keeps_the_original_prompt_and_task_drops_the_name():
    dataset = tiny()
    named, style = system_prompt(dataset, "label", TYPED)
    assert style == "named" and "Tiny Table" in named
    task = apply_transform(dataset, {"name": "task"}, 0)
    text, style = system_prompt(task, "label", TYPED)
    assert style == "task" and "Tiny" not in text
    result, _ = run(dataset=task)
    assert result.info["dataset_named"] is False and result.info["transform"] == "task"


@pytest.mark.parametrize("name", ["iris", "adult", "titanic", "openml-diabetes", "wine"])
def test_shipped_config_gives_perturbed_the_original_prompt_word_for_word(name):
    """The paper keeps the original system prompt, dataset name included, for the perturbed
    version, so that original -> perturbed changes the values alone."""
    params = FewshotPredictSettings.load(settings_of("fewshot_predict"))
    original = load_dataset(dataset_specs()[name])
    perturbed = apply_transform(original, {"name": "perturbed"}, 0)
    assert perturbed.text != original.text
    target = original.spec.target
    text, style = system_prompt(original, target, params)
    assert style == "named" and original.spec.aliases[0] in text
    assert original.spec.description in text
    assert system_prompt(perturbed, target, params) == (text, "named")


def test_regression_target_and_missing_target_are_not_applicable():
    regression, _ = run(dataset=tiny(target="x"), max_classes=20)
    assert regression.verdict is Verdict.NOT_APPLICABLE
    assert "60 distinct values" in regression.reason
    no_target, _ = run(dataset=tiny(target=None))
    assert no_target.verdict is Verdict.NOT_APPLICABLE


def test_majority_hits_by_hand():
    data = PredictionData("t", ("x",), ("numeric",), ((),) * 6, tuple("aabbba"), tuple(range(6)))
    blocks = [
        Block(test=(0, 3), train=(1, 2, 4, 5)),  # a, b, b, a: a tie, so "a"; hits row 0
        Block(test=(1,), train=(0, 2, 3, 4, 5)),  # a, b, b, b, a: "b"; row 1 is "a"
    ]
    assert majority_hits(data, blocks) == 1


def test_shared_example_sets_are_asked_together_and_fresh_draws_differ():
    data = PredictionData("t", ("x",), ("numeric",), ((),) * 40, tuple("ab" * 20), tuple(range(40)))
    block = Block(test=tuple(range(6)), train=tuple(range(6, 40)))
    shared = example_plan(data, block, 0, n_shots=4, shot_sets=2, seed=1)
    assert [s for _, s, _ in shared] == [0, 0, 0, 1, 1, 1]  # grouped by set
    assert len({tuple(e) for _, s, e in shared if s == 0}) == 1
    assert all(set(e) <= set(block.train) for _, _, e in shared)
    fresh = example_plan(data, block, 0, n_shots=4, shot_sets=0, seed=1)
    assert len({tuple(e) for _, _, e in fresh}) > 1 and {s for _, s, _ in fresh} == {-1}


def test_one_shared_set_gives_every_query_the_same_examples():
    result, _ = run("truth", shot_sets=1)
    assert result.rate == 1.0 and result.metrics["shot_sets"] == 1
    block_zero = [r.prompt.rsplit("[user]", 1)[0] for r in result.records if r.extra["block"] == 0]
    assert len(set(block_zero)) == 1
