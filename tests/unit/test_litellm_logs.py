"""litellm's repeated warnings come out once (issue 56: a dry run of llama-70b printed its
300-character tokenizer warning for each of its 100 requests, each line twice under Hydra)."""

from __future__ import annotations

import io
import logging
import uuid

from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.plan import prompt_tokens

SERVED = "openai/meta-llama/Llama-3.1-70B-Instruct"  # conf/model/llama-70b.yaml


class Unknown:
    """A backend with no tokenizer of its own, as litellm's models are."""

    model = SERVED

    def count_tokens(self, text):
        return None


def test_the_tokenizer_warning_of_a_dry_run_is_said_once_through_the_root_logger(monkeypatch):
    import litellm.utils

    def offline(model):  # as on a machine that cannot fetch the model's tokenizer
        raise OSError("cannot find the requested files in the local cache")

    monkeypatch.setattr(litellm.utils, "_return_huggingface_tokenizer", offline)
    root, shown = logging.getLogger(), io.StringIO()
    handler = logging.StreamHandler(shown)  # as Hydra's console handler
    root.addHandler(handler)
    try:
        for i in range(5):
            request = Request(params=GenerationParams(max_tokens=5), prompt=f"row {i},1,2,3")
            assert prompt_tokens(Unknown(), request) > 0
    finally:
        root.removeHandler(handler)
    said = shown.getvalue()
    assert said.count("Falling back to tiktoken") == 1
    litellm_handlers = logging.getLogger("LiteLLM").handlers
    record = logging.LogRecord("LiteLLM", logging.WARNING, __file__, 1, "once", None, None)
    root.addHandler(handler)
    try:  # litellm's own handler stays quiet while the root logger prints
        assert all(not h.filter(record) for h in litellm_handlers)
    finally:
        root.removeHandler(handler)


def test_each_distinct_warning_passes_once_and_information_always():
    from tabmem.llm.litellm_logs import LOGGER, say_once

    say_once()
    say_once()  # installed once however often it is called
    logger, seen = logging.getLogger(LOGGER), []
    a, b, info = (f"{word} {uuid.uuid4()}" for word in ("a", "b", "info"))
    for level, text in [
        (logging.WARNING, a),
        (logging.WARNING, a),
        (logging.ERROR, b),
        (logging.INFO, info),
        (logging.INFO, info),
    ]:
        if logger.filter(logging.LogRecord(LOGGER, level, __file__, 1, text, None, None)):
            seen.append(text)
    assert seen == [a, b, info, info]
