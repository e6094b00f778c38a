"""Served models score text where their config declares ``prompt_logprobs``: vLLM's two reply
shapes read into each prompt token's log-probability, the text's tokens kept after a context
tokenized apart and after BOS, errors sorted, and models without the declaration unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from integration.vllm_server import Scored, VLLMApp, VLLMLikeServer

from tabmem.errors import ConfigError, ProviderError, TransientProviderError
from tabmem.llm.backends import BuildContext
from tabmem.llm.base import GENERATE, LOGPROBS, capabilities_of
from tabmem.llm.litellm_backend import LiteLLMBackend
from tabmem.llm.openai_http import QueryError, read_prompt_logprobs, server_root

BOS = 1
CONF = Path(__file__).resolve().parents[2] / "conf" / "model"


class CharEngine:
    """A stand-in for the transformers model: one token per character (its code + 10), BOS
    (id 1, text ``<s>``) added to a prompt where ``adds_bos``; a token's log-probability
    depends on it and the token before it, so a context changes a text's scores."""

    max_model_len = 64

    def __init__(self, adds_bos: bool) -> None:
        self.adds_bos = adds_bos

    def encode(self, text: str, special: bool) -> list[int]:
        if text == "<s>":
            return [BOS]
        return ([BOS] if special and self.adds_bos else []) + [ord(c) + 10 for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join("<s>" if i == BOS else chr(i - 10) for i in ids)

    @staticmethod
    def logprob(ids: list[int], k: int) -> float:
        return -((ids[k] + 3 * ids[k - 1]) % 13 + 1) / 8

    def run(self, ids, max_tokens, top):
        scored = [
            Scored(ids[k], self.logprob(ids, k), 1 + ids[k] % 5, ((20, -0.05), (ids[k], -0.2)))
            for k in range(1, len(ids))
        ]
        newline = ord("\n") + 10
        return scored, [Scored(newline, -0.05, 1, ((newline, -0.05),))], "stop"


def expected(engine: CharEngine, context: str, text: str) -> list[float]:
    """What the transformers backend would give: BOS + context, then the text's own tokens."""
    head = engine.encode(context, True)
    head = head if head[:1] == [BOS] else [BOS, *head]
    ids = head + engine.encode(text, False)
    return [engine.logprob(ids, k) for k in range(len(head), len(ids))]


@pytest.fixture(params=[True, False], ids=["tokenizer-adds-bos", "bos-declared"])
def engine(request):
    return CharEngine(adds_bos=request.param)


@pytest.fixture
def server(engine):
    with VLLMLikeServer(VLLMApp(engine, "served")) as running:
        yield running


def backend_for(server, engine, shape: str, **changes) -> LiteLLMBackend:
    settings = {
        "model": "openai/served",
        "completion_model": "text-completion-openai/served",
        "name": "m",
        "api_base": server.base_url,
        "prompt_logprobs": shape,
        "bos_token": None if engine.adds_bos else "<s>",
        "max_concurrency": 4,
        **changes,
    }
    return LiteLLMBackend(**settings)


@pytest.mark.parametrize("shape", ["echo", "vllm"])
def test_a_served_model_scores_the_text_after_its_context_as_the_transformers_backend_does(
    server, engine, shape
):
    backend = backend_for(server, engine, shape)
    items = [("a,b\n1,2\n", "3,4\n"), ("", "x,y\n"), ("head\n", ""), ("h\n", "5"), ("ab", "cd")]
    try:
        scored = backend.logprobs_batch(items)
        assert scored == [pytest.approx(expected(engine, c, t)) for c, t in items]
        assert scored[2] == [] and len(scored[3]) == 1
        assert backend.logprobs("3,4\n", "a,b\n1,2\n") == scored[0]
    finally:
        backend.close()


def test_only_a_declared_model_scores_text_and_none_gives_moments(server, engine):
    plain = LiteLLMBackend("openai/served", "plain", api_base=server.base_url)
    scoring = backend_for(server, engine, "vllm")
    assert capabilities_of(plain) == {GENERATE}
    assert capabilities_of(scoring) == {GENERATE, LOGPROBS}
    with pytest.raises(ProviderError, match="declares no prompt_logprobs"):
        plain.logprobs("1,2\n")


def test_llama_70b_declares_it(monkeypatch):
    monkeypatch.setenv("VLLM_API_BASE", "http://127.0.0.1:9/v1")
    cfg = yaml.safe_load((CONF / "llama-70b.yaml").read_text())
    backend = LiteLLMBackend.from_config(cfg, BuildContext(Path("unused")))
    assert capabilities_of(backend) == {GENERATE, LOGPROBS}
    assert backend.batch_size == cfg["max_concurrency"]
    backend.close()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"prompt_logprobs": "logits"}, "use echo or vllm"),
        ({"completion_model": "gpt-3.5-turbo-instruct"}, "text-completion-openai/<served"),
        ({"transport": "litellm"}, "leave transport at auto"),
        ({"api_base": None}, "set api_base or api_base_env"),
    ],
)
def test_a_declaration_its_server_cannot_answer_stops_the_model(server, engine, changes, message):
    with pytest.raises(ConfigError, match=message):
        backend_for(server, engine, "echo", **changes)


def test_a_bos_token_of_several_tokens_is_said_in_one_sentence(server, engine):
    backend = backend_for(server, engine, "echo", bos_token="<bos>")
    with pytest.raises(ConfigError, match="reads as 5 tokens"):
        backend.logprobs("1,2\n", "a\n")
    backend.close()


def test_a_dry_run_sends_no_scoring_request(server, engine):
    backend = backend_for(server, engine, "vllm", require_credentials=False)
    with pytest.raises(QueryError, match="not sent"):
        backend.logprobs_batch([("a\n", "1\n")])


def test_server_errors_are_sorted_as_for_answers(server, engine):
    unknown = backend_for(server, engine, "vllm", completion_model="text-completion-openai/other")
    with pytest.raises(ProviderError, match="HTTP 404"):
        unknown.logprobs("1,2\n")
    too_long = backend_for(server, engine, "echo")
    with pytest.raises(QueryError, match=r"HTTP 400.*max_model_len"):
        too_long.logprobs("9" * 80)
    unknown.close()
    too_long.close()


def test_the_server_root_is_the_api_base_without_v1():
    assert server_root("http://gpu:8000/v1/") == "http://gpu:8000"
    assert server_root("http://proxy/vllm/v1") == "http://proxy/vllm"
    assert server_root("http://gpu:8000") == "http://gpu:8000"


def echo_choice(index: int, values: list[float | None]) -> dict:
    count = len(values)
    return {
        "index": index,
        "text": "",
        "logprobs": {
            "text_offset": list(range(count)),
            "token_logprobs": values,
            "tokens": ["t"] * count,
            "top_logprobs": [None] + [{"t": v} for v in values[1:]],
        },
        "finish_reason": "length",
        "prompt_logprobs": None,
    }


def listed_choice(index: int, ids: list[int], values: list[float]) -> dict:
    entries = [
        {str(i): {"logprob": v, "rank": 2, "decoded_token": "t"}, "7": {"logprob": -0.1}}
        for i, v in zip(ids[1:], values, strict=True)
    ]
    return {"index": index, "text": "", "logprobs": None, "prompt_logprobs": [None, *entries]}


def test_echoed_replies_are_read_per_prompt_in_choice_order_generated_tokens_left_out():
    prompts = [[1, 20, 21], [1, 30]]
    reply = {"choices": [echo_choice(1, [None, -0.5, -9.0]), echo_choice(0, [None, -1, -2, -3])]}
    assert read_prompt_logprobs(reply, prompts, "echo") == [[-1.0, -2.0], [-0.5]]


def test_prompt_logprobs_are_read_by_the_prompt_tokens_ids():
    prompts = [[1, 20, 21]]
    reply = {"choices": [listed_choice(0, [1, 20, 21], [-1.5, -0.25])]}
    assert read_prompt_logprobs(reply, prompts, "vllm") == [[-1.5, -0.25]]


@pytest.mark.parametrize(
    ("reply", "shape"),
    [
        ({"choices": []}, "echo"),
        ({"choices": [echo_choice(0, [None, -1.0])]}, "echo"),  # fewer values than tokens
        ({"choices": [echo_choice(0, [None, "x", -1.0])]}, "echo"),
        ({"choices": [{"index": 0, "logprobs": None}]}, "echo"),
        ({"choices": [listed_choice(0, [1, 20, 99], [-1.0, -2.0])]}, "vllm"),  # not our token
        ({"choices": [listed_choice(0, [1, 20], [-1.0])]}, "vllm"),  # one entry short
        ({"choices": ["not an object"]}, "vllm"),
    ],
)
def test_a_reply_without_a_number_for_each_prompt_token_is_unreadable(reply, shape):
    with pytest.raises(TransientProviderError, match="unreadable reply"):
        read_prompt_logprobs(reply, [[1, 20, 21]], shape)
