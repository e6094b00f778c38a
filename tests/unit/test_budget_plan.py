"""Dry runs send nothing and count what they would send; a budget stops sending once spent."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_usage import PRICE, MeteredBackend, requests

from tabmem.errors import ConfigError
from tabmem.llm.budget import Budget
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.plan import RequestPlan
from tabmem.llm.registry import build_model
from tabmem.report.summary import plan_table


def test_a_dry_run_sends_nothing_caches_nothing_and_counts_the_uncached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    LanguageModel(MeteredBackend(), "m", cache=cache, show_progress=False).run(requests(2))
    backend = MeteredBackend()
    plan = RequestPlan()
    model = LanguageModel(backend, "m", cache=cache, show_progress=False, price=PRICE, plan=plan)
    responses = model.run(requests(5))
    assert backend.calls == 0 and len(cache) == 2
    assert [r.text for r in responses[:2]] == ["a0", "a1"]
    assert all(r.error == "not sent: dry run" for r in responses[2:])
    assert (plan.requests, plan.cached, plan.max_completion_tokens) == (3, 2, 15)
    assert plan.prompt_tokens > 0
    row = plan.as_dict(PRICE)
    assert row["estimated_usd"] == pytest.approx(plan.prompt_tokens * 1e-3 + 15 * 2e-3)
    assert plan.as_dict(None)["estimated_usd"] is None


def test_the_plan_table_sums_the_cells_and_names_unknown_prices():
    cell = {"model": "m", "dataset": "d", "test": "t", "transform": "original"}
    rows = [
        {
            **cell,
            "requests": 3,
            "cached": 1,
            "prompt_tokens": 30,
            "max_completion_tokens": 9,
            "estimated_usd": 0.5,
            "note": "",
        },
        {
            **cell,
            "model": "x",
            "requests": 2,
            "cached": 0,
            "prompt_tokens": 20,
            "max_completion_tokens": 6,
            "estimated_usd": None,
            "note": "",
        },
    ]
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(plan_table(rows))
    text = console.export_text()
    assert "unknown price" in text and "0.5000 + unknown price" in text
    assert "50" in text.splitlines()[-2]


def test_a_budget_stops_sending_once_spent_and_says_how_much(tmp_path):
    ledger = tmp_path / "spend.json"
    backend = MeteredBackend()
    model = LanguageModel(
        backend, "m", show_progress=False, price=PRICE, budget=Budget(0.05, ledger)
    )
    responses = model.run(requests(6))
    # costs: p0 0.010, p1 0.013, p2 0.016, p3 0.019 -> 0.058 >= 0.05 after four answers
    assert backend.calls == 4
    assert [r.error for r in responses[4:]] == [
        "not sent: budget of $0.0500 reached after $0.0580"
    ] * 2
    assert model.budget_stop == "budget of $0.0500 reached after $0.0580"
    assert Budget(1.0, ledger).spent() == pytest.approx(0.058)


def test_cells_share_one_ledger(tmp_path):
    ledger = tmp_path / "spend.json"
    Budget(0.05, ledger).add(0.06)
    backend = MeteredBackend()
    model = LanguageModel(
        backend, "m", show_progress=False, price=PRICE, budget=Budget(0.05, ledger)
    )
    [response] = model.run(requests(1))
    assert backend.calls == 0 and "budget of $0.0500 reached after $0.0600" in response.error


def test_a_budget_needs_a_price(tmp_path):
    config = {
        "name": "mystery",
        "backend": "litellm",
        "litellm_model": "openai/mystery",
        "api_base": "http://127.0.0.1:9/v1",
    }
    with pytest.raises(ConfigError, match="needs the price"):
        build_model(config, None, Path("unused"), budget=Budget(1.0, tmp_path / "s.json"))


def test_a_cache_written_before_usage_was_kept_still_opens(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE responses (key TEXT PRIMARY KEY, model TEXT, text TEXT, created REAL)"
        )
        conn.execute("INSERT INTO responses (key, model, text) VALUES ('k', 'm', 'old answer')")
    cache = ResponseCache(path)
    assert cache.get("k") == "old answer" and cache.get_entry("k").usage == {}
    cache.put("k2", "m", "new", {"prompt_tokens": 3, "completion_tokens": 1})
    assert cache.get_entry("k2").usage == {"prompt_tokens": 3, "completion_tokens": 1}


def test_a_dry_run_counts_a_request_once_per_model():
    """A suite's second test asking what the first asked would be served from the cache."""
    model = LanguageModel(MeteredBackend(), "m", show_progress=False, plan=RequestPlan())
    model.run(requests(3))
    model.plan = RequestPlan()
    model.run(requests(4))
    assert (model.plan.requests, model.plan.cached) == (1, 3)
