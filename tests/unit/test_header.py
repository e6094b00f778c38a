"""Header test mechanics on a hand-made file with a model that answers from a script."""

import random
from pathlib import Path

from tabmem.data import Dataset, DatasetSpec
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.client import LanguageModel
from tabmem.prompts.fewshot import fit_to_context
from tabmem.results import Verdict
from tabmem.tests.base import TestContext
from tabmem.tests.header import run_header_test, split_at_row

TEXT = "a,b,c\n" + "".join(f"{i},{i * 7 % 13},name{i}\n" for i in range(1, 21))


def tiny_dataset(name="tiny"):
    return Dataset(spec=DatasetSpec(name=name, family=name), path=Path("tiny.csv"), text=TEXT)


class TruthBackend:
    """Completes every prompt with the file's true continuation, or with junk."""

    def __init__(self, truthful):
        self.truthful = truthful
        self.identity = {"provider": "test", "model": str(truthful)}

    def complete(self, prompt, params):
        if not self.truthful:
            return "9,9,nobody\n"
        return TEXT[len(prompt) :][: 4 * params.max_tokens]

    def chat(self, messages, params):
        return self.complete(messages[-1]["content"], params)

    def count_tokens(self, text):
        return None

    def close(self):
        pass


def run(truthful, form="completion", **params):
    model = LanguageModel(TruthBackend(truthful), "m", prompt_form=form, show_progress=False)
    ctx = TestContext(tiny_dataset(), model, {"few_shot_pool": [], **params}, seed=3)
    return run_header_test(ctx)


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
