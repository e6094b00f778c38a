"""The transformers backend on a tiny random Llama built here (no download, no GGUF)."""

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_model import save_tiny_model  # noqa: E402

from tabmem.errors import ProviderError  # noqa: E402
from tabmem.llm.base import GenerationParams  # noqa: E402
from tabmem.llm.client import LanguageModel  # noqa: E402
from tabmem.llm.logprobs import ScoreRequest  # noqa: E402
from tabmem.llm.stopping import StopRule  # noqa: E402
from tabmem.llm.transformers_backend import (  # noqa: E402
    Batcher,
    TransformersBackend,
    cut_at_stop,
    render_plain_chat,
)


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    folder = save_tiny_model(tmp_path_factory.mktemp("tiny"))
    tiny = TransformersBackend(folder, "tiny", context_window=256, device="cpu", batch_size=4)
    yield tiny
    tiny.close()


def greedy(n):
    return GenerationParams(max_tokens=n, temperature=0.0)


def test_logprobs_match_a_manual_forward_pass(backend):
    context, text = "a,b\n", "1,2\n"
    ids = [1, *backend.tokenizer(context + text)["input_ids"]]  # BOS, one id per character
    assert len(ids) == 1 + len(context + text)
    with torch.no_grad():
        logits = backend.model(torch.tensor([ids])).logits[0]
    logp = torch.log_softmax(logits, -1)
    start = 1 + len(context)
    manual = [float(logp[i - 1, ids[i]]) for i in range(start, len(ids))]
    assert backend.logprobs(text, context) == pytest.approx(manual, abs=1e-4)
    assert all(v < 0 for v in manual)


def test_batched_logprobs_equal_one_at_a_time(backend):
    items = [("h\n", "1,2"), ("header,x\n", "10,20,30\n"), ("", "abc")]
    batched = backend.logprobs_batch(items)
    for (context, text), values in zip(items, batched, strict=True):
        assert len(values) == len(text)  # BOS gives even the first character a prediction
        assert values == pytest.approx(backend.logprobs(text, context), abs=1e-4)


def test_left_padded_batch_generates_what_single_prompts_do(backend):
    prompts = [("a", 6), ("a,b,c\n1,2,3\n", 3), ("xyz", 6)]
    single = [backend._generate_batch(greedy(n), [(p, True, n)])[0] for p, n in prompts]
    batched = backend._generate_batch(greedy(6), [(p, True, n) for p, n in prompts])
    assert batched == single
    assert len(backend.tokenizer(batched[1])["input_ids"]) <= 3  # cut to its own max_tokens


def test_concurrent_calls_through_the_client_are_answered_in_order(backend):
    model = LanguageModel(backend, "tiny", "completion", max_concurrency=4, show_progress=False)
    from tabmem.llm.base import Request

    requests = [Request(params=greedy(4), prompt=p) for p in ["a", "b", "c", "d", "e"]]
    answers = model.run(requests)
    assert [a.error for a in answers] == [None] * 5
    assert [a.text for a in answers] == [backend.complete(r.prompt, greedy(4)) for r in requests]


def test_chat_without_template_uses_a_plain_transcript(backend):
    messages = [{"role": "user", "content": "hi"}]
    assert render_plain_chat(messages) == "User: hi\n\nAssistant:"
    assert isinstance(backend.chat(messages, greedy(3)), str)


def test_tokens_and_identity(backend, tmp_path):
    assert backend.count_tokens("a,b") == 3
    assert backend.tokenize("a,b") == ["a", ",", "b"]
    other = TransformersBackend(save_tiny_model(tmp_path / "other", seed=1), "tiny", device="cpu")
    assert other.identity["weights_sha256"] != backend.identity["weights_sha256"]
    assert backend.identity["provider"] == "transformers"


def test_scores_through_the_language_model(backend):
    model = LanguageModel(backend, "tiny", "completion", show_progress=False)
    [score] = model.logprobs([ScoreRequest("1,2", "a\n")])
    assert score.error is None and len(score.logprobs) == 3


def test_too_long_text_is_a_failed_score_not_a_crash(backend):
    model = LanguageModel(backend, "tiny", "completion", show_progress=False)
    [score] = model.logprobs([ScoreRequest("1" * 400)])
    assert score.error and "context window" in score.error


def test_missing_weights_is_one_sentence(tmp_path):
    with pytest.raises(ProviderError, match="no weights at"):
        TransformersBackend(tmp_path / "absent", "ghost", device="cpu")


def test_cut_at_stop_and_batcher_groups():
    assert cut_at_stop("1,2\n3,4", ["\n"]) == "1,2"
    assert cut_at_stop("abc", []) == "abc"
    seen = []

    def run(group, items):
        seen.append((group, list(items)))
        return [f"{group}:{i}" for i in items]

    batcher = Batcher(run, size=8, wait_s=0.01)
    assert batcher.submit("g", 1) == "g:1"
    assert seen == [("g", [1])]


def test_a_stop_rule_ends_generation_once_the_answer_is_settled(backend):
    rule = StopRule.verbatim("1,2\n3,4\n")
    params = GenerationParams(max_tokens=40, temperature=0.0)
    whole = backend.complete("a,b\n", params)
    stopped = backend.complete("a,b\n", replace(params, stop_rule=rule))
    assert whole.startswith(stopped) and len(stopped) < len(whole)  # greedy: fewer of the same
    assert rule.end(stopped) is not None
    assert rule.cut(stopped) == rule.cut(whole)


def test_a_cpu_model_takes_the_threads_its_cell_was_given(tmp_path):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        folder = save_tiny_model(tmp_path / "t")
        TransformersBackend(folder, "tiny", device="cpu").close()
        assert torch.get_num_threads() == 2
        TransformersBackend(folder, "tiny", device="cpu", threads=1).close()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_a_plain_prompt_is_generated_after_bos_as_a_scored_context_is_read(backend):
    prompt = "5.1,3.5,1.4,0.2\n4.9,3.0,"
    ids = backend.tokenizer(prompt)["input_ids"]
    assert ids[:1] != [backend.tokenizer.bos_token_id]  # the tokenizer adds no BOS itself

    def continuation(start):
        with torch.no_grad():
            out = backend.model.generate(
                input_ids=torch.tensor([start]), do_sample=False, max_new_tokens=8, pad_token_id=0
            )
        return backend.tokenizer.decode(out[0, len(start) :], skip_special_tokens=True)

    after_bos, alone = continuation([1, *ids]), continuation(ids)
    assert after_bos != alone  # the test can tell the two apart on this prompt
    assert backend.complete(prompt, greedy(8)) == after_bos
    assert backend.identity["plain_prompts"] == "after BOS"  # older cached answers miss
