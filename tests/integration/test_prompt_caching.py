"""Provider prompt caching over real HTTP: the shared prefix's cached tokens logged and priced.

The oracle server reports a chat request's earlier-seen prefix as OpenAI does
(``prompt_tokens_details.cached_tokens``); a priced model counts those tokens apart and pays
the cache-read price for them.
"""

from __future__ import annotations

import pytest

from tabmem.data import dataset_specs, load_dataset
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.oracle import OracleServer
from tabmem.llm.registry import build_model

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic")

PRICES = {
    "input_cost_per_token": 1e-5,
    "output_cost_per_token": 3e-5,
    "cache_read_input_token_cost": 1e-6,
}


def test_prefix_tokens_the_provider_cached_are_counted_and_cheaper(tmp_path):
    iris = load_dataset(dataset_specs()["iris"])
    prefix = (
        {"role": "system", "content": "Continue the table."},
        {"role": "user", "content": iris.records[1]},
        {"role": "assistant", "content": iris.records[2]},
    )
    params = GenerationParams(max_tokens=20)
    requests = [
        Request(params=params, messages=(*prefix, {"role": "user", "content": iris.text[: 80 + i]}))
        for i in range(5)
    ]
    with OracleServer([iris]) as server:
        cfg = {
            "name": "priced",
            "backend": "litellm",
            "litellm_model": "openai/oracle-memorizer",
            "api_base": server.base_url,
            **PRICES,
        }
        model = build_model(cfg, None, tmp_path, show_progress=False)
        try:
            answers = model.run(requests)
        finally:
            model.close()
    assert all(a.error is None and a.text for a in answers)
    stats = model.stats
    per_prefix = stats.provider_cached_prompt_tokens / 4
    assert per_prefix > 0 and stats.provider_cached_prompt_tokens == 4 * per_prefix
    full = stats.prompt_tokens * 1e-5 + stats.completion_tokens * 3e-5
    saved = stats.provider_cached_prompt_tokens * (1e-5 - 1e-6)
    assert stats.cost_usd == pytest.approx(full - saved)
