"""Reading a file in passes: which rows, the passes' layout, and scores equal to scoring each
text alone after the same context (tiny random models built here, and scripted scorers)."""

import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest
from harness import settings_of

from tabmem.battery.base import TestContext
from tabmem.battery.file_pass import (
    MAX_PLACES,
    RowTexts,
    read_file,
    rows_sentence,
    sample_rows,
)
from tabmem.battery.zlib_ratio import ZlibRatio
from tabmem.data import Dataset, DatasetSpec
from tabmem.errors import RetryPolicy, TransientProviderError
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.logprobs import ScoreRequest, score_texts
from tabmem.llm.passes import PassRequest, score_passes

TEXT = "x,y,label\n" + "".join(
    f"{i * 37 % 101}.{i * 7 % 10},{i * 53 % 97},k{i % 3}\n" for i in range(1, 41)
)


def dataset(text=TEXT, name="toy"):
    return Dataset(spec=DatasetSpec(name=name, family=name), path=Path("toy.csv"), text=text)


def _logprob(before: str, char: str) -> float:
    """A scripted model's log-probability of ``char`` after the text ``before``: it depends on
    the last few characters and on how much text came before (so a context of other length
    or content changes it)."""
    key = f"{before[-3:]}|{len(before) % 7}|{char}"
    return -(1 + zlib.crc32(key.encode()) % 100 / 50)


class Causal:
    """One token per character, each scored by ``_logprob`` from everything before it; scores
    a text alone (``logprobs``) or a whole pass (``logprobs_pass``)."""

    def __init__(self, passes=True):
        self.identity = {"provider": "test", "model": "causal"}
        self.singles, self.passes = [], []
        if not passes:
            self.logprobs_pass = None

    def logprobs(self, text, context=""):
        self.singles.append((context, text))
        return [_logprob(context + text[:i], c) for i, c in enumerate(text)]

    def logprobs_pass(self, requests, moments=False):
        self.passes += requests
        out = []
        for request in requests:
            answers = []
            for j, text in request.texts():
                before = "".join(request.pieces[:j])
                answers.append([_logprob(before + text[:i], c) for i, c in enumerate(text)])
            out.append(answers)
        return out

    def count_tokens(self, text):
        return len(text)

    def chat(self, messages, params):
        return ""

    def complete(self, prompt, params):
        return ""


def model(backend, cache=None):
    return LanguageModel(backend, "m", prompt_form="completion", cache=cache, show_progress=False)


def test_every_row_up_to_the_cap_then_a_seeded_sample():
    rng = np.random.default_rng
    assert sample_rows(40, 1000, rng(0)) == list(range(40))
    few = sample_rows(400, 50, rng(3))
    assert few == sorted(rng(3).choice(400, size=50, replace=False).tolist())
    many = sample_rows(30_000, 1000, rng(1))
    assert len(many) == len(set(many)) == 1000 and many == sorted(many)
    starts = [r for r in many if r - 1 not in many]
    assert len(starts) <= MAX_PLACES  # runs of ten consecutive rows
    assert many == sample_rows(30_000, 1000, rng(1)) != sample_rows(30_000, 1000, rng(2))
    assert rows_sentence(40, 40, 1000) == "all 40 rows of the file"
    assert "runs of 10 consecutive rows" in rows_sentence(1000, 30_000, 1000)


def test_each_row_is_read_after_at_least_its_context_rows_and_its_other_texts_in_its_place():
    data = dataset()
    items = [RowTexts(r, (f"other{r}",)) for r in range(len(data.rows))]
    read = read_file(data, items, len, window=120, context_rows=3)
    assert len(read.passes) > 3
    for item in items:
        (p, real), (q, other) = read.slots[item.row]
        request = read.passes[p]
        assert p == q and sum(len(x) for x in request.pieces) <= 120
        (j_real, text), (j_other, alt) = request.texts()[real], request.texts()[other]
        assert text == data.rows[item.row] and alt == f"other{item.row}" and j_real == j_other
        context = request.context(j_real)
        start = read.context_from[item.row]
        assert context == data.header + "\n" + "".join(
            r + "\n" for r in data.rows[start : item.row]
        )
        assert item.row - start >= min(3, item.row)
    # the passes overlap by the context rows: a pass starts three rows before its first row
    assert {read.context_rows(r) for r in range(3, len(data.rows))} >= {3}


def test_a_sparse_sample_starts_a_new_pass_where_the_gap_is_longer_than_the_context():
    data = dataset()
    items = [RowTexts(r, ("z",)) for r in (2, 3, 20, 31)]
    read = read_file(data, items, len, window=10_000, context_rows=2)
    assert len(read.passes) == 3  # 2 and 3 together; 20 and 31 each after two rows
    assert [read.context_from[r] for r in (2, 3, 20, 31)] == [0, 0, 18, 29]


def test_header_alone_and_no_window():
    data = dataset()
    items = [RowTexts(r, ("z",)) for r in range(10)]
    header = read_file(data, items, len, window=60, context_rows=5, header_only=True)
    assert len(header.passes) > 1
    assert all(p.pieces == (data.header + "\n",) and not p.scored for p in header.passes)
    assert all(header.context_rows(r) == 0 for r in range(10))
    copies = read_file(data, items, len, window=0, context_rows=5)
    assert len(copies.passes) == 10
    assert copies.passes[7].pieces == (
        data.header + "\n" + "".join(r + "\n" for r in data.rows[2:7]),
    )


def test_a_pass_answers_as_each_text_scored_alone_after_the_same_context():
    data = dataset()
    items = [RowTexts(r, (data.rows[(r + 7) % 40],)) for r in range(40)]
    read = read_file(data, items, len, window=200, context_rows=4)
    native, alone = Causal(), Causal(passes=False)
    passed = score_passes(model(native), read.passes, "test")
    single = score_passes(model(alone), read.passes, "test")
    assert native.passes and not native.singles and alone.singles
    for r in range(40):
        a, b = read.answers(passed, r), read.answers(single, r)
        assert [x.logprobs for x in a] == [y.logprobs for y in b]
    # one by one, a row and its other text come together, in file order, so that an engine
    # that keeps its last prompt (llama.cpp) reads each prefix once
    assert [t for _, t in alone.singles[::2]] == data.rows
    assert all(alone.singles[2 * i][0] == alone.singles[2 * i + 1][0] for i in range(40))


def test_the_test_scores_equal_the_old_per_row_scores_where_the_contexts_are_the_same():
    # A file of 40 rows fits one pass: each row is read after every row before it, which is
    # what the old scoring read with forty rows of context. Same contexts, same scores.
    data = dataset()
    one_pass = ZlibRatio().run(
        TestContext(data, model(Causal()), settings_of("zlib_ratio", context_rows=5), 0)
    )
    copies = ZlibRatio().run(
        TestContext(
            data,
            model(Causal(passes=False)),
            settings_of("zlib_ratio", context_rows=40, window_tokens=0),
            0,
        )
    )
    assert one_pass.metrics["passes"] == 1 and copies.metrics["passes"] == 40
    assert "in order" not in one_pass.info["context"]
    for a, b in zip(one_pass.records, copies.records, strict=True):
        assert a.extra["score_real"] == b.extra["score_real"]
        assert a.extra["score_twin"] == b.extra["score_twin"]
    assert one_pass.p_value == copies.p_value and one_pass.n_hits == copies.n_hits


def test_passes_are_cached_whole(tmp_path):
    data = dataset()
    read = read_file(data, [RowTexts(r, ("1,2,k0",)) for r in range(40)], len, 300, 3)
    cache = ResponseCache(tmp_path / "c.sqlite")
    backend = Causal()
    first = score_passes(model(backend, cache), read.passes, "test")
    asked = len(backend.passes)
    again = score_passes(model(backend, cache), read.passes, "test")
    assert len(backend.passes) == asked
    assert all(r.cached for answers in again for r in answers)
    assert [[r.logprobs for r in a] for a in again] == [[r.logprobs for r in a] for a in first]


def test_a_failed_pass_fails_its_own_texts_only():
    data = dataset()

    class Flaky(Causal):
        def logprobs_pass(self, requests, moments=False):
            if any(data.rows[20] in r.pieces for r in requests):
                raise RuntimeError("device lost")
            return super().logprobs_pass(requests, moments)

    read = read_file(data, [RowTexts(r, ("z",)) for r in range(40)], len, 100, 2)
    answers = score_passes(model(Flaky()), read.passes, "test")
    failed = [a for a in answers if a[0].error]
    assert failed and len(failed) < len(answers)
    assert all(r.error and "device lost" in r.error for a in failed for r in a)


def test_a_pass_request_checks_its_branches():
    with pytest.raises(ValueError):
        PassRequest(("a",), (), ((0, "b"),))
    with pytest.raises(ValueError):
        PassRequest(("a",), (1,))
    request = PassRequest(("h\n", "1", "\n", "2"), (1, 3), ((3, "9"),))
    assert [(r.context, r.text) for r in request.as_requests()] == [
        ("h\n", "1"),
        ("h\n1\n", "2"),
        ("h\n1\n", "9"),
    ]


# The transformers backend on tiny random models: a pass gives what each text gets alone.

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_model import save_tiny_model

    from tabmem.llm.transformers_backend import TransformersBackend

    folder = save_tiny_model(tmp_path_factory.mktemp("tiny"))
    backend = TransformersBackend(folder, "tiny", context_window=256, device="cpu")
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def tiny_sliding(tmp_path_factory):
    """A two-layer Gemma 3 whose first layer sees a window of six positions."""
    from tiny_model import CHARS, save_tiny_model
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from tabmem.llm.transformers_backend import TransformersBackend

    llama = save_tiny_model(tmp_path_factory.mktemp("tokenizer"))
    folder = tmp_path_factory.mktemp("gemma")
    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=len(CHARS) + 4,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        sliding_window=6,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    Gemma3ForCausalLM(config).save_pretrained(folder)
    for file in Path(llama).glob("*token*"):
        shutil.copy(file, folder)
    backend = TransformersBackend(folder, "tiny-gemma", context_window=256, device="cpu")
    yield backend
    backend.close()


REQUEST = PassRequest(
    ("a,b\n", "1,2", "\n", "3,4", "\n", "5,6,7"),
    (1, 3, 5),
    ((1, "9,9"), (3, "8,8"), (5, "7,7,7"), (6, "0")),
)


def _alone(backend, moments=False):
    items = [(r.context, r.text) for r in REQUEST.as_requests()]
    return backend.logprob_moments_batch(items) if moments else backend.logprobs_batch(items)


@pytest.mark.parametrize("fixture", ["tiny", "tiny_sliding"])
def test_a_pass_gives_each_text_what_it_gets_alone(fixture, request):
    backend = request.getfixturevalue(fixture)
    assert backend.supports_passes
    assert (backend._sliding_window() is None) == (fixture == "tiny")
    [passed] = backend.logprobs_pass([REQUEST])
    for mine, alone in zip(passed, _alone(backend), strict=True):
        assert mine == pytest.approx(alone, abs=1e-5)
    [moments] = backend.logprobs_pass([REQUEST], moments=True)
    for mine, alone in zip(moments, _alone(backend, moments=True), strict=True):
        assert np.allclose(mine, alone, atol=1e-5)


def test_branches_run_in_groups_over_the_kept_keys(tiny, monkeypatch):
    [whole] = tiny.logprobs_pass([REQUEST])
    run = tiny._trunk_then_branches
    monkeypatch.setattr(tiny, "_trunk_then_branches", lambda t, b: run(t, b, group_tokens=2))
    [grouped] = tiny.logprobs_pass([REQUEST])
    for a, b in zip(grouped, whole, strict=True):
        assert a == pytest.approx(b, abs=1e-6)


def test_a_pass_longer_than_the_context_window_fails(tiny):
    with pytest.raises(ValueError, match="context window"):
        tiny.logprobs_pass([PassRequest(("x" * 300,), (0,))])


class Overloaded(Causal):
    """A served scorer that answers 503 ``busy`` times before it scores."""

    def __init__(self, busy):
        super().__init__(passes=False)
        self.busy = busy

    def logprobs(self, text, context=""):
        if self.busy:
            self.busy -= 1
            raise TransientProviderError("server said 503")
        return super().logprobs(text, context)


@pytest.mark.parametrize(("busy", "scored"), [(2, True), (9, False)])
def test_a_transient_scoring_failure_is_tried_again_until_retries_run_out(busy, scored):
    backend = Overloaded(busy)
    model = LanguageModel(
        backend, "m", prompt_form="completion", show_progress=False, retry=RetryPolicy(4, 0.0)
    )
    [answer] = score_texts(model, [ScoreRequest("k1", "1.7,")], "rows")
    assert (answer.error is None) == scored
    assert model.stats.retries == min(busy, 4)
    if scored:
        assert answer.logprobs == Causal().logprobs("k1", "1.7,")
    else:
        assert "503" in answer.error
