"""The lines under the end-of-run answer (issue 56): the spend line counts what the table's
``calls`` and ``cached`` columns count, and a combined p of 0.5 says why it is 0.5."""

from __future__ import annotations

import io

from rich.console import Console

from tabmem.report.summary import ceiling_note, print_summary, spend_line
from tabmem.results import CellResult


def _outcome(**counts) -> dict:
    base = CellResult("oracle-null", "iris", "header", "original", "finished", "no_evidence")
    base.add_calls(counts)
    return vars(base)


def test_the_spend_line_counts_the_calls_and_the_answers_without_a_token_count():
    # the oracles' streamed answers stop once their score is settled, before the usage comes
    outcomes = [
        _outcome(model_calls=25, uncounted_answers=25),
        _outcome(model_calls=4, cache_hits=21, uncounted_answers=3, prompt_tokens=40),
    ]
    line = spend_line(outcomes)
    assert line.startswith("Spend: $0.0000 for 29 calls (40 prompt and 0 completion tokens")
    assert "28 answers came without a token count" in line
    assert "and 21 cached answers at no cost" in line


def test_the_spend_line_of_answers_that_all_reported_their_tokens():
    line = spend_line([_outcome(model_calls=1, prompt_tokens=1200, completion_tokens=30)])
    assert line == (
        "Spend: $0.0000 for 1 call (1,200 prompt and 30 completion tokens reported) and 0 cached "
        "answers at no cost (0 prompt tokens)."
    )


def _verdict(model: str, p: float):
    from tabmem.report.dataset_verdicts import DatasetOutcome
    from tabmem.results import Verdict
    from tabmem.stats.combine import DatasetVerdict

    return DatasetOutcome(model, "iris", "original", 0, DatasetVerdict(Verdict.NO_EVIDENCE, p, ""))


def test_a_combined_p_of_one_half_says_why():
    note = ceiling_note([_verdict("oracle-null", 0.5), _verdict("oracle-learner", 0.2)])
    assert note == (
        "p 0.5: no combined test found anything (p-values above 0.5 count as 0.5 when combined)."
    )
    assert ceiling_note([_verdict("oracle-learner", 0.2)]) == ""


def test_the_summary_prints_the_reason_under_its_answer(tmp_path):
    job = tmp_path / "0"
    for test in ("header", "row_completion"):
        CellResult(
            "oracle-null",
            "iris",
            test,
            "original",
            "finished",
            "no_evidence",
            "0/4",
            "r",
            p_value=1.0,
        ).write(job)
    out = io.StringIO()
    print_summary(
        tmp_path,
        "sqlite:///x.db",
        "e",
        Console(file=out, width=100),
        verdicts=[_verdict("oracle-null", 0.5)],
    )
    said = out.getvalue()
    assert "p 0.5: no combined test found anything" in said
    assert said.index("no combined test found") < said.index("Spend:")
