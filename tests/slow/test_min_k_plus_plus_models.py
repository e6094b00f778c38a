"""Min-K%++ on the real SmolLM2 weights (slow): the transformers backend's moments against the
model's own logits, the test on iris, and the embedded llama.cpp model, which has none."""

from __future__ import annotations

import math

import pytest
import torch
from harness import settings_of
from omegaconf import OmegaConf

from tabmem.api import compose_config
from tabmem.battery.base import TestContext, run_test
from tabmem.data import dataset_specs, load_dataset
from tabmem.llm.registry import build_model
from tabmem.results import Verdict

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return tmp_path_factory.mktemp("mkpp")


def built(name, outputs):
    cfg = OmegaConf.to_container(compose_config([f"model={name}"]).model, resolve=True)
    return build_model(cfg, None, outputs / "weights", show_progress=False)


@pytest.fixture(scope="module")
def smollm2(outputs):
    model = built("smollm2-135m-hf", outputs)
    yield model
    model.close()


def test_the_moments_are_those_of_the_models_whole_distribution(smollm2):
    backend = smollm2.backend
    items = [("sepal_length,sepal_width\n", "5.1,3.5"), ("", "a,b,c\n1,2,3")]
    moments = backend.logprob_moments_batch(items)
    for row, plain in zip(moments, backend.logprobs_batch(items), strict=True):
        assert [t[0] for t in row] == pytest.approx(plain, abs=1e-5)
    # The first text alone, recomputed in float64 from the model's logits.
    context, text = backend._context_ids(items[0][0]), backend._encode(items[0][1], False)
    with torch.no_grad():
        logits = backend.model(input_ids=torch.tensor([context + text])).logits[0].double()
    logp = torch.log_softmax(logits[len(context) - 1 : -1], dim=-1)
    mean = (logp.exp() * logp).sum(-1)
    sd = (logp.exp() * (logp - mean[:, None]) ** 2).sum(-1).sqrt()
    assert len(moments[0]) == len(text)
    for (lp, mu, sigma), m, s, token, row in zip(
        moments[0], mean.tolist(), sd.tolist(), text, logp, strict=True
    ):
        assert mu == pytest.approx(m, abs=1e-3) and sigma == pytest.approx(s, abs=1e-3)
        assert lp == pytest.approx(row[token].item(), abs=1e-4)
        assert mu < 0 < sigma


def test_smollm2_scores_iris_rows_against_twin_rows(smollm2):
    iris = load_dataset(dataset_specs()["iris"])
    settings = settings_of("min_k_plus_plus", n_rows=12)
    result = run_test("min_k_plus_plus", TestContext(iris, smollm2, settings, 0))
    assert result.verdict in {Verdict.EVIDENCE, Verdict.NO_EVIDENCE, Verdict.AMBIGUOUS}
    assert result.metrics["pairs_scored"] == 12 and 0 < result.p_value <= 1
    assert result.info["context"].startswith("the header alone")  # iris is sorted by species
    scores = [r.extra[k] for r in result.records for k in ("score_real", "score_twin")]
    assert all(math.isfinite(s) for s in scores) and len(set(scores)) > 12


def test_the_embedded_llama_cpp_model_is_not_applicable_with_the_reason(outputs):
    pytest.importorskip("xllamacpp")
    model = built("smollm2-135m", outputs)
    try:
        iris = load_dataset(dataset_specs()["iris"])
        settings = settings_of("min_k_plus_plus", n_rows=12)
        result = run_test("min_k_plus_plus", TestContext(iris, model, settings, 0))
    finally:
        model.close()
    assert result.verdict == Verdict.NOT_APPLICABLE
    assert "llama_cpp backend" in result.reason and "200 times" in result.reason
