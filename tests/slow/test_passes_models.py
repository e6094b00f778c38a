"""Reading a file in passes on the real SmolLM2 weights (slow): each row's and its twin row's
log-probabilities equal those of the same text scored alone after the same context."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tabmem.api import compose_config
from tabmem.battery.file_pass import RowTexts, read_file, token_counter
from tabmem.data import dataset_specs, load_dataset
from tabmem.data.twin import twin_of
from tabmem.llm.registry import build_model

pytestmark = pytest.mark.slow
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    cfg = OmegaConf.to_container(compose_config(["model=smollm2-135m-hf"]).model, resolve=True)
    weights = tmp_path_factory.mktemp("weights")
    model = build_model(cfg, None, weights, show_progress=False)
    yield model
    model.close()


def test_a_pass_over_wine_scores_each_row_as_scoring_it_alone_would(smollm2):
    backend = smollm2.backend
    assert backend.supports_passes
    data = load_dataset(dataset_specs()["wine"])
    twin = twin_of(data, 0)
    items = [RowTexts(r, (twin.rows[r],)) for r in range(36)]
    # a window of 1,024 tokens: three passes over these rows, overlapping by five rows
    read = read_file(data, items, token_counter(smollm2), window=1024, context_rows=5)
    assert len(read.passes) >= 3
    for request in read.passes:  # the pieces tokenize alike whole and apart
        whole = backend._context_ids("".join(request.pieces))
        apart = backend._context_ids(request.pieces[0])
        apart += [t for piece in request.pieces[1:] for t in backend._encode(piece, False)]
        assert whole == apart
    passed = backend.logprobs_pass(read.passes)
    worst = 0.0
    for row in range(0, 36, 3):  # every third row and its twin row, each scored alone
        (p, real), (_, other) = read.slots[row]
        singles = read.passes[p].as_requests()
        alone = backend.logprobs_batch(
            [(s.context, s.text) for s in (singles[real], singles[other])]
        )
        for mine, theirs in zip((passed[p][real], passed[p][other]), alone, strict=True):
            assert len(mine) == len(theirs)
            worst = max(worst, max(abs(a - b) for a, b in zip(mine, theirs, strict=True)))
    assert worst < 1e-4, worst
    moments = backend.logprobs_pass(read.passes[:1], moments=True)[0]
    for plain, triples in zip(passed[0], moments, strict=True):
        assert [t[0] for t in triples] == pytest.approx(plain, abs=1e-5)
