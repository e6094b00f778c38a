"""Row completion on a hand-made file, with models that answer from a script."""

import random
from pathlib import Path

import pytest
from harness import settings_of

from tabmem.battery import row_completion
from tabmem.battery.base import TestContext
from tabmem.battery.row_completion import RowCompletion, holm, other_rows
from tabmem.battery.windows import target_positions, window
from tabmem.data import Dataset, DatasetSpec
from tabmem.errors import ConfigError
from tabmem.llm.client import LanguageModel
from tabmem.results import Verdict
from tabmem.stats import hits

RNG = random.Random(5)
ROWS = [
    f"{RNG.randint(100, 999)},{RNG.choice(['red', 'blue', 'green'])},{RNG.random():.4f}"
    for _ in range(80)
]
TEXT = "code,color,score\n" + "".join(r + "\n" for r in ROWS)


def dataset(text=TEXT):
    return Dataset(spec=DatasetSpec(name="tiny", family="tiny"), path=Path("t.csv"), text=text)


class ScriptBackend:
    """Answers with the true next row (``mode="truth"``), a made-up row, a wrapped truth, or
    a copy of the last row shown (``mode="repeat"``)."""

    def __init__(self, mode):
        self.mode = mode
        self.identity = {"provider": "test", "model": mode}

    def complete(self, prompt, params):
        if self.mode == "repeat":
            return prompt.strip().split("\n")[-1] + "\n"
        following = TEXT[TEXT.index(prompt) + len(prompt) :].split("\n")[0]
        if self.mode == "truth":
            return following + "\n"
        if self.mode == "wrapped":
            return f"Here is the next row:\n```csv\n{following}\n```"
        if self.mode == "late":
            return f"1,red,0.0000\n{following}\n"
        if self.mode == "fail":
            raise RuntimeError("backend down")
        return "123,red,0.5000\n"

    def chat(self, messages, params):
        return self.complete(messages[-1]["content"], params)

    def count_tokens(self, text):
        return None

    def tokenize(self, text):
        return None

    def close(self):
        pass


def run(mode, form="completion", text=TEXT, **params):
    model = LanguageModel(ScriptBackend(mode), "m", prompt_form=form, show_progress=False)
    settings = settings_of("row_completion", few_shot_pool=[], n_queries=20, **params)
    return RowCompletion().run(TestContext(dataset(text), model, settings, seed=1))


def test_window_is_the_rows_before_the_target():
    win = window(dataset(), 12, 10)
    assert win.prefix == "".join(r + "\n" for r in ROWS[2:12])
    assert win.expected == ROWS[12]


def test_positions_are_seeded_and_a_larger_n_keeps_the_smaller_one():
    small = target_positions(80, 10, 5, seed=3)
    assert small == target_positions(80, 10, 5, seed=3)
    assert target_positions(80, 10, 9, seed=3)[:5] == small
    assert all(10 <= t < 80 for t in small) and len(set(small)) == 5


def test_other_rows_never_include_the_target():
    drawn = other_rows(random.Random(0).sample(range(4), 4), 2)
    assert sorted(drawn) == [0, 1, 3, 4]


def test_truthful_model_is_evidence_with_both_statistics():
    result = run("truth")
    assert result.verdict is Verdict.EVIDENCE
    assert (result.n_hits, result.n_queries) == (20, 20)
    assert result.metrics["mean_similarity"] == 1.0
    assert result.metrics["rows_ordered"] == 0.0
    assert result.metrics["similarity_p_value"] < 0.01
    assert result.p_value < 1e-10


def test_made_up_rows_are_no_evidence():
    result = run("junk")
    assert result.verdict is Verdict.NO_EVIDENCE
    assert result.n_hits == 0
    assert abs(result.metrics["similarity_gain"]) < 0.1


def test_chat_answer_with_lead_in_and_fence_is_scored_on_its_row():
    result = run("wrapped", form="chat", system_prompt="next row please")
    assert result.n_hits == 20
    assert result.records[0].prompt.startswith("[system]\nnext row please")


def test_true_row_written_second_does_not_count():
    result = run("late")
    assert result.n_hits == 0
    assert result.records[0].extra["answer_row"] == "1,red,0.0000"


def test_failed_queries_are_misses_not_crashes():
    result = run("fail")
    assert result.n_hits == 0
    assert all(r.error for r in result.records)


def test_sorted_file_skips_the_similarity_test():
    text = "code,color,score\n" + "".join(r + "\n" for r in sorted(ROWS))
    result = run("junk", text=text)
    assert result.metrics["rows_ordered"] == 1.0
    assert "similarity_p_value" not in result.metrics
    assert result.info["similarity_test"].startswith("skipped")


def test_copying_the_last_row_shown_is_no_evidence_where_the_text_runs_in_order():
    """A running id written as text (P041, P042) makes a copy of the previous row resemble the
    next one more than random rows; the text part of the order check skips the similarity."""
    rng = random.Random(3)
    rows = [f"P{i:03d},{rng.randint(20, 400)},{rng.choice('yn')}" for i in range(120)]
    text = "plot,trees,organic\n" + "".join(r + "\n" for r in rows)
    result = run("repeat", text=text)
    assert result.metrics["row_order_text_p_value"] < 0.01
    assert result.metrics["rows_ordered"] == 1.0
    assert "similarity_p_value" not in result.metrics
    assert result.verdict is Verdict.NO_EVIDENCE


def test_too_few_shuffles_for_alpha_is_a_clear_error():
    with pytest.raises(ConfigError, match="order_permutations"):
        run("truth", order_permutations=50)


def test_short_file_is_not_applicable_with_a_reason():
    result = run("truth", text="a,b\n1,2\n3,4\n")
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert "too few" in result.reason


def test_same_seed_same_prompts():
    assert [r.prompt for r in run("truth").records] == [r.prompt for r in run("truth").records]


@pytest.mark.parametrize("form", ["chat", "completion"])
def test_exact_match_baseline_is_reported(form):
    result = run("truth", form=form)
    # 80 distinct rows: the most frequent row is 1 of 80
    assert result.metrics["baseline_mode_row"] == pytest.approx(1 / 80)
    assert result.baseline == pytest.approx(1 / 80)


def test_holm_adjusts_in_the_given_order():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.6, 0.2]) == pytest.approx([0.6, 0.4])
    assert holm([0.007]) == [0.007]


def test_two_statistics_share_alpha(monkeypatch):
    # exact rows alone at p=0.007 < 0.01, the similarity test not significant: two tests at
    # alpha each would say evidence; Holm asks 0.007 * 2 < 0.01 of the smaller p-value
    monkeypatch.setattr(hits, "binomial_greater", lambda k, n, p0: 0.007)
    monkeypatch.setattr(row_completion, "wilcoxon_greater", lambda gains: 0.5)
    result = run("truth")
    assert result.metrics["rows_ordered"] == 0.0
    assert result.verdict is Verdict.AMBIGUOUS
    assert result.metrics["exact_p_value"] == pytest.approx(0.007)
    assert result.metrics["exact_p_value_holm"] == pytest.approx(0.014)
    assert result.metrics["similarity_p_value"] == pytest.approx(0.5)
    assert result.metrics["similarity_p_value_holm"] == pytest.approx(0.5)
    assert result.p_value == pytest.approx(0.014)


def test_one_statistic_on_an_ordered_file_keeps_its_p_value(monkeypatch):
    monkeypatch.setattr(hits, "binomial_greater", lambda k, n, p0: 0.007)
    text = "code,color,score\n" + "".join(r + "\n" for r in sorted(ROWS))
    result = run("junk", text=text)
    assert "similarity_p_value_holm" not in result.metrics
    assert result.metrics["exact_p_value_holm"] == pytest.approx(0.007)
