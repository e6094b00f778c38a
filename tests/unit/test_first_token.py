"""First token on hand-made files: when it applies, and how hits are counted."""

import random
from pathlib import Path

import pytest
from harness import settings_of

from tabmem.battery.base import TestContext
from tabmem.battery.first_token import FirstToken
from tabmem.data import Dataset, DatasetSpec
from tabmem.errors import ConfigError
from tabmem.llm.client import LanguageModel
from tabmem.results import Verdict
from tabmem.stats.predictors import KINDS
from tabmem.stats.pvalues import binomial_greater

RNG = random.Random(11)
ROWS = [f"{RNG.choice('123456789')}{RNG.randint(0, 99)},{RNG.choice('xyz')}" for _ in range(300)]


def text_of(rows, header="num,kind"):
    return header + "\n" + "".join(r + "\n" for r in rows)


class Script:
    """Answers the true next row (``truth``), or always a row starting with ``9``."""

    def __init__(self, text, truthful, tokenizer=None):
        self.text, self.truthful, self.tokenizer = text, truthful, tokenizer
        self.identity = {"provider": "test", "model": str(truthful)}

    def complete(self, prompt, params):
        if not self.truthful:
            return "9,x\n"
        return self.text[self.text.index(prompt) + len(prompt) :].split("\n")[0] + "\n"

    def chat(self, messages, params):
        return self.complete(messages[-1]["content"], params)

    def count_tokens(self, text):
        return None

    def tokenize(self, text):
        return self.tokenizer(text) if self.tokenizer else None

    def close(self):
        pass


def run(rows, truthful=True, tokenizer=None, header="num,kind", **params):
    text = text_of(rows, header)
    model = LanguageModel(
        Script(text, truthful, tokenizer), "m", prompt_form="completion", show_progress=False
    )
    dataset = Dataset(spec=DatasetSpec(name="t", family="t"), path=Path("t.csv"), text=text)
    settings = settings_of("first_token", few_shot_pool=[], n_queries=25, **params)
    return FirstToken().run(TestContext(dataset, model, settings, seed=2))


def test_true_first_tokens_beat_the_baselines():
    result = run(ROWS)
    assert result.verdict is Verdict.EVIDENCE
    assert result.n_hits == 25
    assert result.baseline < 0.5
    assert result.metrics["mcnemar_p_value"] < 0.01
    assert result.info["tokenizer"] == "text rule"
    assert (
        result.records[0].extra["expected_token"]
        == ROWS[0][:0] + result.records[0].expected.split(",")[0]
    )


def test_a_constant_guess_is_no_evidence():
    result = run(ROWS, truthful=False)
    assert result.verdict is Verdict.NO_EVIDENCE
    assert result.n_hits == sum(r.expected.startswith("9,") for r in result.records)


def test_the_model_tokenizer_decides_the_first_token():
    result = run(ROWS, tokenizer=list)  # one character per token
    assert result.info["tokenizer"] == "model"
    assert all(len(r.extra["expected_token"]) == 1 for r in result.records)


def test_row_id_first_field_is_not_applicable():
    rows = [f"{i},{r}" for i, r in enumerate(ROWS, start=1)]
    result = run(rows, header="id,num,kind")
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert "row id" in result.reason
    assert result.n_queries == 0


def test_constant_first_token_is_not_applicable():
    result = run([f"x{r}" for r in ROWS], header="num,kind")
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert "always 'x'" in result.reason


@pytest.mark.parametrize("block", [2, 3])
def test_predictable_first_token_leaves_no_power(block):
    rows = [f"{'ab'[(i // block) % 2]}-{r}" for i, r in enumerate(ROWS)]
    result = run(rows, context_rows=block)
    # runs of equal tokens: the previous rows tell the next token almost always
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert "baseline" in result.reason


def test_too_few_rows_to_score_the_baseline_is_not_applicable():
    result = run(ROWS[:45])  # 42 rows have three rows before them
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert "baseline_min_rows=50" in result.reason
    assert run(ROWS[:45], baseline_min_rows=40).verdict is Verdict.EVIDENCE


def test_hits_are_compared_with_the_best_cross_fitted_accuracy():
    result = run(ROWS, truthful=False)
    best = max(result.metrics[f"baseline_{k}"] for k in KINDS)
    assert result.baseline == pytest.approx(max(best, result.metrics["baseline_chance"]))
    assert result.p_value == pytest.approx(
        binomial_greater(result.n_hits, result.n_queries, result.baseline)
    )
    assert result.metrics["baseline_scored_positions"] == len(ROWS) - 3


def test_baselines_cannot_see_more_rows_than_the_model():
    with pytest.raises(ConfigError, match="context_rows"):
        run(ROWS, context_rows=12)
