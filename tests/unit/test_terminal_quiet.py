"""The terminal stays readable: no line per request, and prompt and answer apart without
colour."""

from __future__ import annotations

import io
import logging

from rich.console import Console

from tabmem.report.terminal import completion_text, show_result
from tabmem.results import QueryRecord, TestResult, Verdict


def test_httpx_says_nothing_per_request_once_a_backend_is_loaded() -> None:
    import tabmem.llm.litellm_backend  # noqa: F401  (what every served model loads)

    for name in ("httpx", "httpcore"):
        assert not logging.getLogger(name).isEnabledFor(logging.INFO), name


def _printed(color: bool) -> str:
    record = QueryRecord(
        prompt="p",
        expected="r1,0\n",
        completion="r2,0\n",
        score=0.0,
        extra={"prefix": "5.1,3.5,1.4,0.2,I"},
    )
    result = TestResult("row_completion", Verdict.NO_EVIDENCE, "none", 1, 0, records=[record])
    out = io.StringIO()
    console = Console(
        file=out, width=100, force_terminal=color, color_system="standard" if color else None
    )
    show_result(result, console, verbose=True)
    return out.getvalue()


def test_without_colour_a_line_separates_the_prompt_from_the_answer() -> None:
    text = _printed(color=False)
    (prompt_line,) = [line for line in text.splitlines() if "0.2,I" in line]
    assert "r2,0" not in prompt_line and "r1,0" not in prompt_line
    assert "the model's answer (1 of its 5 characters match the file)" in text
    assert "the file goes on with" in text


def test_with_colour_the_answer_follows_the_prompt_as_it_did() -> None:
    text = _printed(color=True)
    assert "the model's answer" not in text and "\x1b[" in text


def test_the_best_query_marks_where_it_cut_the_prompts_start() -> None:
    header = "target,alcohol,malic_acid,ash," + ",".join(f"feature_{i}" for i in range(40))
    record = QueryRecord(
        prompt="p", expected="", completion="1,14.23\n", score=1.0, extra={"prefix": header}
    )
    shown = completion_text(record, prompt_tail=100, plain=True).plain
    assert shown.startswith("…") and shown[1:].startswith(header[-100:])
    short = QueryRecord(prompt="p", expected="", completion="", score=0.0, extra={"prefix": "a,b"})
    assert completion_text(short, prompt_tail=100).plain.startswith("a,b")  # nothing cut
