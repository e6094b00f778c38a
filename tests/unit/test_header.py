"""Header test mechanics on a hand-made file with a model that answers from a script."""

import random
from pathlib import Path

import pytest
from harness import settings_of

from tabmem.battery.base import TestContext
from tabmem.battery.header import Header, split_at_row
from tabmem.data import Dataset, DatasetSpec
from tabmem.errors import ConfigError
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.client import LanguageModel
from tabmem.prompts.fewshot import fit_to_context
from tabmem.results import Verdict

TEXT = "a,b,c\n" + "".join(f"{i},{i * 7 % 13},name{i}\n" for i in range(1, 21))


def tiny_dataset(name="tiny", text=TEXT):
    return Dataset(spec=DatasetSpec(name=name, family=name), path=Path("tiny.csv"), text=text)


class TruthBackend:
    """Completes every prompt with the file's true continuation, with junk, or (``rows=k``)
    with the rest of the cut row and ``k`` true rows, then junk."""

    def __init__(self, truthful, rows=None, text=TEXT):
        self.truthful, self.rows, self.text = truthful, rows, text
        self.identity = {"provider": "test", "model": f"{truthful}-{rows}"}

    def complete(self, prompt, params):
        if not self.truthful:
            return "9,9,nobody\n"
        following = self.text[len(prompt) :]
        if self.rows is not None:
            kept = following.split("\n")[: self.rows + 1]
            return "\n".join(kept) + "\n9,9,nobody\n"
        return following[: 4 * params.max_tokens]

    def chat(self, messages, params):
        return self.complete(messages[-1]["content"], params)

    def count_tokens(self, text):
        return None

    def close(self):
        pass


def run(truthful, form="completion", rows=None, text=TEXT, **params):
    backend = TruthBackend(truthful, rows, text)
    model = LanguageModel(backend, "m", prompt_form=form, show_progress=False)
    ctx = TestContext(
        tiny_dataset(text=text),
        model,
        settings_of("header", **{"few_shot_pool": [], **params}),
        seed=3,
    )
    return Header().run(ctx)


def test_split_cuts_inside_the_row_and_continuation_completes_the_region():
    split = split_at_row(tiny_dataset(), 4, 6, random.Random(0))
    assert TEXT.startswith(split.prefix + split.continuation)
    assert split.prefix.count("\n") == 4  # header + 3 whole rows, then part of row 4
    assert (split.prefix + split.continuation).count("\n") == 7


def test_split_beyond_the_file_is_none():
    assert split_at_row(tiny_dataset(), 50, 60, random.Random(0)) is None


def test_truthful_model_is_evidence_and_junk_is_not():
    good = run(True)
    assert good.verdict is Verdict.EVIDENCE
    assert good.n_queries == 4 and good.n_hits == 4
    bad = run(False)
    assert bad.verdict is Verdict.NO_EVIDENCE
    assert bad.metrics["best_verbatim_rows"] == 0


def test_chat_form_puts_the_prefix_in_the_last_user_message():
    result = run(True, form="chat", system_prompt="continue")
    assert result.verdict is Verdict.EVIDENCE
    assert result.records[0].prompt.startswith("[system]\ncontinue")


def test_same_seed_same_prompts():
    assert [r.prompt for r in run(True).records] == [r.prompt for r in run(True).records]


def test_fit_to_context_drops_examples_then_gives_up():
    params = GenerationParams(max_tokens=10)

    def build(kept):
        return Request(params=params, prompt="x" * (100 * kept + 50))

    fitted = fit_to_context(build, 3, len, 260, params)
    assert fitted.request is not None and fitted.dropped_examples == 1
    assert fit_to_context(build, 3, len, 40, params).request is None


def test_one_row_after_the_cut_is_evidence_only_under_the_paper_rule():
    strict = run(True, rows=1)
    assert strict.verdict is Verdict.AMBIGUOUS
    assert strict.metrics["best_verbatim_rows"] == 1
    assert strict.metrics["splits_reaching_1_row"] == 4
    assert strict.metrics["splits_reaching_2_rows"] == 0
    assert (strict.metrics["evidence_strict"], strict.metrics["evidence_paper"]) == (0.0, 1.0)
    assert strict.info["verdict_paper"] == "evidence" and strict.n_hits == 0
    paper = run(True, rows=1, rule="paper")
    assert paper.verdict is Verdict.EVIDENCE and paper.n_hits == 4
    assert paper.info["verdict_strict"] == "ambiguous"


def test_two_rows_after_the_cut_are_evidence_under_both_rules():
    result = run(True, rows=2)
    assert result.verdict is Verdict.EVIDENCE
    assert result.metrics["splits_reaching_2_rows"] == 4
    assert (result.metrics["evidence_strict"], result.metrics["evidence_paper"]) == (1.0, 1.0)


def test_finishing_the_cut_row_alone_counts_under_neither_rule():
    result = run(True, rows=0, rule="paper")
    assert result.verdict is Verdict.NO_EVIDENCE
    assert result.metrics["splits_reaching_1_row"] == 0


SHORT = "a,b,c\n1,2,3\n4,5,6\n7,8,9\n"  # three data rows: split row 2 leaves one row after


def test_a_file_too_short_for_the_rule_is_not_applicable_with_the_reason():
    result = run(True, text=SHORT)  # a model that knows the file cannot reach evidence either
    assert result.verdict is Verdict.NOT_APPLICABLE and result.n_queries == 0
    assert "3 data rows" in result.reason and "2 whole rows" in result.reason
    assert result.info["skipped_split_rows"] == [4, 6, 8]
    paper = run(True, text=SHORT, rule="paper")  # one row after the cut is the rule's there
    assert paper.n_queries == 1 and paper.info["verdict_paper"] == "evidence"
    # ... but one split of a three-row file is what the best data-only guess writes a third
    # of the time: the cell says what its p-value allows
    assert paper.p_value == pytest.approx(1 / 3)
    assert paper.verdict is Verdict.AMBIGUOUS and "not below alpha=0.01" in paper.reason


def test_a_file_that_reaches_the_rule_on_one_split_is_asked():
    text = SHORT + "10,11,12\n"  # split row 2 now leaves rows 3 and 4
    asked = run(True, text=text)
    assert asked.n_queries == 2 and asked.info["verdict_strict"] == "evidence"
    # one of two split rows hit, each a 1-in-4 guess for a model without the rows
    assert asked.verdict is Verdict.AMBIGUOUS and asked.p_value == pytest.approx(1 - 0.75**2)
    assert run(False, text=text).verdict is Verdict.NO_EVIDENCE


def test_unknown_rule_is_a_clear_error():
    with pytest.raises(ConfigError, match="rule"):
        run(True, rule="lenient")


def chat_requests(**params):
    result = run(True, form="chat", few_shot_pool=["iris", "wine", "adult"], **params)
    return [r.prompt.split("[user]") for r in result.records]


def test_examples_cut_at_one_row_make_the_queries_share_their_prompt_up_to_the_file():
    shared = chat_requests(few_shot_row=4)
    assert len({"[user]".join(parts[:-1]) for parts in shared}) == 1
    assert len({parts[-1] for parts in shared}) == 4
    own_rows = chat_requests(few_shot_row=None)
    assert len({"[user]".join(parts[:-1]) for parts in own_rows}) == 4


def test_stopping_on_divergence_keeps_the_scores():
    for rows in (0, 1, 2):
        stopped, whole = run(True, rows=rows), run(True, rows=rows, stop_on_divergence=False)
        assert [r.score for r in stopped.records] == [r.score for r in whole.records]
        assert stopped.verdict == whole.verdict
        assert all(r.completion.endswith("9,9,nobody\n") for r in stopped.records)


def test_the_p_value_is_the_binomial_tail_of_split_rows_at_the_whole_row_baseline():
    # TEXT's 20 rows are distinct: the best data-only guess (the mode row) is right on 1 in 20
    good = run(True)
    assert good.baseline == pytest.approx(1 / 20)
    assert (good.metrics["split_rows_hit"], good.metrics["split_rows_asked"]) == (4, 4)
    assert good.p_value == pytest.approx(0.05**4)
    assert "4 of 4 split rows" in good.reason and "p=6.25e-06" in good.reason
    one = run(True, split_rows=[2, 11, 12])  # n_rows 12: only split 2 leaves 2 rows after
    assert (one.metrics["split_rows_hit"], one.metrics["split_rows_asked"]) == (1, 3)
    assert one.p_value == pytest.approx(1 - 0.95**3)
    assert run(False).p_value == 1.0
    assert run(True, rows=1).p_value == 1.0  # strict: one row after the cut is not its hit
    assert run(True, rows=1, rule="paper").p_value == pytest.approx(0.05**4)


def test_answers_at_one_split_row_are_one_chance_not_several():
    # the same rows asked four times: a guess right once is right four times
    result = run(True, split_rows=[2, 2, 2, 2])
    assert result.n_queries == 4 and result.n_hits == 4
    assert (result.metrics["split_rows_hit"], result.metrics["split_rows_asked"]) == (1, 1)
    assert result.p_value == pytest.approx(0.05)


def test_a_file_of_one_repeated_row_gives_the_rule_no_p_value_below_one():
    text = "a,b\n" + "1,x\n" * 20  # a model without the rows writes them all
    result = run(True, text=text)
    assert result.info["verdict_strict"] == "evidence"  # the named rule reports what it saw
    assert result.baseline == 1.0 and result.p_value == 1.0
    assert result.verdict is Verdict.AMBIGUOUS  # but it is no evidence of rows seen
