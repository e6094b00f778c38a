"""Batch mode's parts: the batch price, reading output lines, and which models can batch."""

from __future__ import annotations

import json

import pytest

from tabmem.errors import ConfigError
from tabmem.llm.batch import BatchAnswer, _parse_line
from tabmem.llm.pricing import model_price
from tabmem.llm.registry import build_model


def test_the_batch_price_is_the_cost_maps_else_half():
    listed = model_price({"backend": "litellm", "litellm_model": "gpt-4o"}, batch=True)
    full = model_price({"backend": "litellm", "litellm_model": "gpt-4o"})
    assert listed is not None and full is not None
    assert listed.input_per_token == pytest.approx(full.input_per_token / 2)
    assert "batch prices" in listed.source
    configured = {"backend": "litellm", "litellm_model": "x/y", "input_cost_per_token": 2e-6}
    halved = model_price({**configured, "output_cost_per_token": 4e-6}, batch=True)
    assert (halved.input_per_token, halved.output_per_token) == (1e-6, 2e-6)
    assert model_price({"backend": "oracle"}, batch=True).cost(100, 100) == 0


def test_output_and_error_lines_are_read_by_custom_id():
    ok = {"custom_id": "k1", "response": {"status_code": 200, "body": {"choices": []}}}
    assert _parse_line(json.dumps(ok)) == ("k1", BatchAnswer({"choices": []}))
    failed = {
        "custom_id": "k2",
        "response": {"status_code": 429, "body": {"error": {"message": "slow down"}}},
    }
    assert _parse_line(json.dumps(failed)) == ("k2", BatchAnswer(None, "HTTP 429: slow down"))


def test_a_model_that_runs_here_cannot_batch(tmp_path):
    cfg = {"name": "b", "backend": "baseline", "estimator": "majority_class"}
    with pytest.raises(ConfigError, match="not an API model"):
        build_model(cfg, None, tmp_path, batch_dir=tmp_path / "batches")
