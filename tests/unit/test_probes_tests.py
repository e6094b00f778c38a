"""The completion and existence probes end to end on a hand-made dataset, with the reference
models answered in this process, in chat and plain-completion form, on real, like and
obfuscated data, and with models whose answers fail or cannot be read."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from tabmem.battery.base import TestContext, get_test
from tabmem.data import Dataset, DatasetSpec
from tabmem.data.transforms import apply_transform
from tabmem.llm.client import LanguageModel
from tabmem.llm.oracle import MarginalOracle, MemorizerOracle, NullOracle, last_user_text
from tabmem.results import TestResult, Verdict
from tabmem.stats.pvalues import binomial_greater

ROOT = Path(__file__).resolve().parents[2]
PROBES = ("completion_choice", "existence")


def meadow_text(n_rows: int = 90) -> str:
    """Plants: a unique tag, a kind with a clear mode, a two-decimal height and a leaf count."""
    rng = random.Random(3)
    lines = ["tag,kind,height,leaves"]
    for i in range(n_rows):
        kind = rng.choices(["fern", "moss", "reed", "sedge", "rush"], [5, 2, 1, 1, 1])[0]
        lines.append(f"P{500 + i},{kind},{rng.uniform(0.1, 9.9):.2f},{rng.randint(3, 60)}")
    return "\n".join(lines) + "\n"


MEADOW = Dataset(
    spec=DatasetSpec(name="meadow", aliases=("Meadow Plants",), family="meadow"),
    path=Path("meadow.csv"),
    text=meadow_text(),
)
ORACLES = {
    "memorizer": MemorizerOracle([MEADOW]),
    "marginal": MarginalOracle([MEADOW]),
    "null": NullOracle([MEADOW]),
}


class Backend:
    """Answers each prompt with ``answer(prompt, params, chat)``, as the server would."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.identity = {"provider": "test", "model": "probe"}

    def chat(self, messages, params):
        return self.answer(last_user_text(messages) or "", params, True)

    def complete(self, prompt, params):
        return self.answer(prompt, params, False)

    def count_tokens(self, text):
        return None

    def tokenize(self, text):
        return None

    def close(self):
        pass


def oracle_backend(name: str) -> Backend:
    oracle = ORACLES[name]
    return Backend(
        lambda prompt, p, chat: oracle.generate(
            prompt, p.max_tokens, p.stop, p.seed, p.temperature, chat=chat
        )
    )


def settings(test: str, **changes) -> dict:
    params = yaml.safe_load((ROOT / "conf" / "test" / f"{test}.yaml").read_text())
    return {**params, "n_queries": 30, **changes}


def run(
    test: str,
    backend: Backend,
    form: str = "chat",
    transform: str = "original",
    seed: int = 0,
    **changes,
) -> TestResult:
    dataset = apply_transform(MEADOW, {"name": transform}, seed)
    model = LanguageModel(backend, "probe", prompt_form=form, show_progress=False)
    return get_test(test)(TestContext(dataset, model, settings(test, **changes), seed=seed))


def best_single(records) -> float:
    """The best data-only rule's mean chance of picking the real option over the records."""
    names = {name for r in records for name in r.extra["baseline_chances"]}
    return max(sum(r.extra["baseline_chances"].get(n, 0.0) for r in records) for n in names) / len(
        records
    )


@pytest.mark.parametrize("test", PROBES)
@pytest.mark.parametrize("form", ["chat", "completion"])
def test_the_memorizer_recognises_every_real_record(test: str, form: str) -> None:
    result = run(test, oracle_backend("memorizer"), form)
    assert result.verdict == Verdict.EVIDENCE
    assert (result.n_hits, result.n_queries) == (30, 30)
    rule = sum(r.extra["rule_hit"] for r in result.records) / 30
    assert result.baseline == pytest.approx(best_single(result.records))
    assert result.baseline >= max(0.2, rule)
    assert result.metrics["chance_p_value"] == pytest.approx(0.2**30)
    assert result.p_value < 1e-6
    assert result.metrics["n_unparseable"] == 0
    if form == "completion":
        assert all(r.prompt.endswith("\nAnswer:") for r in result.records)


@pytest.mark.parametrize("test", PROBES)
@pytest.mark.parametrize("transform", ["like", "obfuscated"])
def test_the_memorizer_does_not_recognise_the_variants(test: str, transform: str) -> None:
    result = run(test, oracle_backend("memorizer"), transform=transform)
    assert result.verdict in {Verdict.NO_EVIDENCE, Verdict.AMBIGUOUS}
    assert result.n_hits < 15


@pytest.mark.parametrize("test", PROBES)
@pytest.mark.parametrize("oracle", ["marginal", "null"])
def test_models_without_the_rows_stay_near_chance(test: str, oracle: str) -> None:
    result = run(test, oracle_backend(oracle))
    assert result.verdict in {Verdict.NO_EVIDENCE, Verdict.AMBIGUOUS}
    assert result.p_value > 0.001


def test_the_frequency_rule_is_reported_and_matches_the_marginal_model() -> None:
    result = run("completion_choice", oracle_backend("marginal"))
    # the metric is the rule's expected accuracy on the very questions asked
    expected = sum(r.extra["frequency_rule_hit"] for r in result.records)
    assert result.metrics["frequency_rule_rate"] == pytest.approx(expected / result.n_queries)
    assert 0.0 < expected < result.n_queries
    # the marginal oracle follows the rule, ties drawn at random: same expectation per question
    assert abs(result.n_hits - expected) <= 6


def test_the_dataset_is_named_on_real_and_like_data_only() -> None:
    for transform, named in [("original", True), ("like", True), ("obfuscated", False)]:
        result = run("existence", oracle_backend("null"), transform=transform, n_queries=3)
        assert all(("Meadow Plants" in r.prompt) == named for r in result.records)
        assert all(("tag =" in r.prompt) == named for r in result.records)


def test_completion_questions_hide_high_entropy_attributes() -> None:
    result = run("completion_choice", oracle_backend("null"))
    assert result.info["attribute_pool"] == ["tag", "height"]
    assert result.metrics["hidden_per_record"] == 1
    for record in result.records:
        assert record.extra["attribute"] in {"tag", "height"}
        assert f"{record.extra['attribute']} = [hidden]" in record.prompt
        assert record.expected in "ABCDE" and len(record.extra["options"]) == 5


def test_the_same_seed_asks_the_same_questions() -> None:
    first = run("existence", oracle_backend("null"), seed=4)
    again = run("existence", oracle_backend("null"), seed=4)
    other = run("existence", oracle_backend("null"), seed=5)
    assert [r.prompt for r in first.records] == [r.prompt for r in again.records]
    assert [r.prompt for r in first.records] != [r.prompt for r in other.records]


def test_unreadable_answers_are_counted_apart_and_score_as_misses() -> None:
    result = run("completion_choice", Backend(lambda prompt, p, chat: "no idea, sorry"))
    assert result.n_hits == 0 and result.metrics["n_unparseable"] == 30
    assert result.info["parse_rules"] == {"unparseable": 30}
    assert result.verdict == Verdict.NO_EVIDENCE


def test_failed_queries_are_misses_and_do_not_stop_the_test() -> None:
    calls = {"n": 0}
    memorizer = oracle_backend("memorizer")

    def flaky(prompt, p, chat):
        calls["n"] += 1
        if calls["n"] % 3 == 0:
            raise RuntimeError("connection reset")
        return memorizer.answer(prompt, p, chat)

    result = run("existence", Backend(flaky), form="completion")
    failed = sum(1 for r in result.records if r.error)
    assert failed == 10 and result.n_hits == 20
    assert result.all_metrics()["n_failed_queries"] == 10
    assert result.metrics["n_unparseable"] == 0 and result.info["parse_rules"]["failed"] == 10
    # a third of the answers lost: 20/30 against the best data-only rule on these questions
    # (the copula rule picks the real record on 0.367 of them, above chance and the others)
    rule = sum(r.extra["rule_hit"] for r in result.records) / 30
    assert result.baseline == pytest.approx(best_single(result.records))
    assert result.baseline >= max(0.2, rule)
    assert result.verdict == Verdict.EVIDENCE
    assert result.p_value == pytest.approx(binomial_greater(20, 30, result.baseline))


def test_a_table_with_too_few_distinct_values_is_not_applicable() -> None:
    text = "a,b\n" + "".join(f"{i % 3},{i % 2}\n" for i in range(30))
    tiny = Dataset(spec=DatasetSpec(name="tiny"), path=Path("tiny.csv"), text=text)
    model = LanguageModel(oracle_backend("null"), "probe", show_progress=False)
    for test in PROBES:
        result = get_test(test)(TestContext(tiny, model, settings(test), seed=0))
        assert result.verdict == Verdict.NOT_APPLICABLE and "5 distinct values" in result.reason
