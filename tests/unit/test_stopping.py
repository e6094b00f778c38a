"""Stop rules: a completion cut where its score is settled scores exactly as the whole one."""

import random

import pytest

from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.cache import cache_key
from tabmem.llm.client import LanguageModel
from tabmem.llm.python_backend import PythonBackend
from tabmem.llm.stopping import StopRule
from tabmem.stats.answers import first_csv_row
from tabmem.stats.scoring import strip_code_fence, verbatim_match

EXPECTED = "4,name4\n5,7,name5\n6,3,name6\n"
HEADER = "a,b,c"


def verbatim_score(text: str) -> tuple[int, int]:
    match = verbatim_match(EXPECTED, strip_code_fence(text))
    return match.chars, match.rows


def completions(seed: int, n: int) -> list[str]:
    """True continuations broken at random places, with junk lines, fences and lead-ins."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        right = EXPECTED[: rng.randrange(len(EXPECTED) + 1)]
        pieces = ["9,9,x", "", "oops", "5,7", "\n", "1.1," * rng.randrange(20)]
        junk = "".join(rng.choice(pieces) + "\n" for _ in range(3))
        text = right + rng.choice(["", "Q", "\n", "7"]) + junk
        if rng.random() < 0.3:
            text = rng.choice(["```csv\n", "```\n", "Here it is:\n", "a,b,c\n"]) + text
        out.append(text)
    return out


@pytest.mark.parametrize("text", completions(0, 300))
def test_verbatim_cut_scores_as_the_whole_completion(text):
    rule = StopRule.verbatim(EXPECTED)
    cut = rule.cut(text)
    assert text.startswith(cut)
    assert verbatim_score(cut) == verbatim_score(text)
    assert_settles_as_the_whole(rule, text)


@pytest.mark.parametrize("text", completions(1, 300))
def test_first_row_cut_answers_as_the_whole_completion(text):
    rule = StopRule.first_row(HEADER, ",")
    cut = rule.cut(text)
    assert text.startswith(cut)
    assert first_csv_row(cut, HEADER, ",") == first_csv_row(text, HEADER, ",")
    assert_settles_as_the_whole(rule, text)


def assert_settles_as_the_whole(rule: StopRule, text: str) -> None:
    """A prefix that settles the score settles it where the whole text does: a stream closed
    there is cut exactly as the whole answer would be."""
    for k in range(len(text) + 1):
        if rule.end(text[:k]) is not None:
            assert rule.end(text[:k]) == rule.end(text)


def test_verbatim_stops_at_the_end_of_the_line_that_differs():
    rule = StopRule.verbatim(EXPECTED)
    assert rule.end("4,name4\n5,7,nameX") is None  # the differing line is still open
    assert rule.cut("4,name4\n5,7,nameX\n6,3,name6\n") == "4,name4\n5,7,nameX\n"
    assert rule.cut(EXPECTED + "7,1,name7\n") == EXPECTED
    assert rule.end("```") is None and rule.end("``") is None
    assert rule.cut("```csv\n4,nameQ\nmore\n") == "```csv\n4,nameQ\n"
    assert rule.end("4,name4\n5,7") is None  # still right: more could count
    endless = "4,name4\n5,7," + "1.1," * 50
    assert rule.cut(endless) == "4,name4\n5,7,1.1,1."  # one past the longest line (9)


def test_first_row_passes_over_lead_ins_and_stops_after_the_row():
    rule = StopRule.first_row(HEADER, ",")
    assert rule.cut("```\nHere:\na,b,c\n\n1,2,3\n4,5,6\n") == "```\nHere:\na,b,c\n\n1,2,3\n"
    assert rule.end("1,2,3") is None
    assert rule.end("just words\n") is None  # too few fields: a later row could be the answer


def test_the_rule_is_in_the_cache_key_only_when_set():
    plain = GenerationParams(max_tokens=5)
    assert "stop_rule" not in plain.as_dict()
    ruled = GenerationParams(max_tokens=5, stop_rule=StopRule.verbatim("x"))
    other = GenerationParams(max_tokens=5, stop_rule=StopRule.verbatim("y"))
    keys = {cache_key({"m": "1"}, Request(params=p, prompt="p")) for p in (plain, ruled, other)}
    assert len(keys) == 3


def whole_answer(prompt: str) -> str:
    """A model that writes its whole answer whatever the rule (it cannot stop early)."""
    return "4,name4\n5,7,nameX\n6,3,name6\n" + "junk\n" * 50


def test_the_client_cuts_every_backend_answer_by_the_rule():
    backend = PythonBackend(whole_answer, "whole", "test_stopping.whole_answer")
    model = LanguageModel(backend, "whole", show_progress=False)
    params = GenerationParams(max_tokens=500, stop_rule=StopRule.verbatim(EXPECTED))
    ruled, plain = model.run(
        [Request(params=params, prompt="p"), Request(params=GenerationParams(500), prompt="p")]
    )
    assert ruled.text == "4,name4\n5,7,nameX\n"
    assert plain.text.endswith("junk\n" * 50)
