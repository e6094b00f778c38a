"""Build a ready ``LanguageModel`` from a model config (``conf/model/*.yaml``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tabmem.errors import ConfigError, RetryPolicy
from tabmem.llm.backends import BuildContext, backend_class
from tabmem.llm.base import Backend
from tabmem.llm.budget import Budget
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel
from tabmem.llm.plan import RequestPlan
from tabmem.llm.pricing import model_price, unpriced_budget
from tabmem.llm.reasoning import Reasoning


def build_backend(
    cfg: Mapping[str, Any],
    weights_dir: Path,
    require_credentials: bool = True,
    threads: int | None = None,
) -> Backend:
    """The backend a model config names (``backend:``, a row of ``tabmem.llm.backends``), or
    one clear error (a dry run, which sends nothing, builds API models without their keys).
    ``threads``: the CPU threads a local model uses when its config leaves ``n_threads`` null
    (the runner's share of the cores)."""
    ctx = BuildContext(weights_dir, require_credentials, threads)
    return backend_class(str(cfg.get("backend")), str(cfg["name"])).from_config(cfg, ctx)


def build_model(
    cfg: Mapping[str, Any],
    cache: ResponseCache | None,
    weights_dir: Path,
    show_progress: bool = True,
    budget: Budget | None = None,
    plan: RequestPlan | None = None,
    threads: int | None = None,
    batch_dir: Path | None = None,
) -> LanguageModel:
    """A cached, concurrent, retrying model from its config; priced, capped by ``budget``,
    and sending nothing when ``plan`` is given (a dry run). ``batch_dir``: send through the
    Batch API, at its price, keeping pending batches' ids there."""
    retry = cfg.get("retry") or {}
    price = model_price(cfg, batch=batch_dir is not None)
    if budget is not None and price is None:
        raise ConfigError(unpriced_budget(str(cfg["name"])))
    backend = build_backend(cfg, weights_dir, require_credentials=plan is None, threads=threads)
    batch = None
    if batch_dir is not None:
        if not hasattr(backend, "batch_client"):
            raise ConfigError(
                f"batch=true sends API requests through a Batch API; model '{cfg['name']}' "
                f"(backend {cfg.get('backend')}) is not an API model. Run it without batch=true."
            )
        if plan is None:
            batch = backend.batch_client(batch_dir, float(cfg.get("batch_poll_seconds", 30)))
    return LanguageModel(
        backend=backend,
        name=cfg["name"],
        prompt_form=cfg.get("prompt_form", "chat"),
        context_window=int(cfg.get("context_window", 4096)),
        cache=cache,
        max_concurrency=int(cfg.get("max_concurrency") or cfg.get("n_parallel") or 1),
        retry=RetryPolicy(
            max_retries=int(retry.get("max_retries", 4)),
            base_delay=float(retry.get("base_delay", 1.0)),
            max_delay=float(retry.get("max_delay", 60.0)),
        ),
        show_progress=show_progress,
        price=price,
        budget=budget,
        plan=plan,
        reasoning=Reasoning.of_model(cfg),
        batch=batch,
    )
