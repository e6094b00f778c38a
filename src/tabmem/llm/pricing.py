"""What a model's tokens cost: the model config's own prices, else litellm's offline cost map.

A model config may set ``input_cost_per_token`` and ``output_cost_per_token`` (USD, litellm's
names; ``cache_read_input_token_cost`` and ``cache_creation_input_token_cost`` for prompt
tokens a provider's prompt cache served or stored), which wins over the map: a self-hosted or
discounted endpoint has its own price.
Models that run here (weights, oracles, statistical baselines) cost nothing. A litellm model
missing from the map (``LITELLM_LOCAL_MODEL_COST_MAP=True``: the copy shipped with litellm) has
no price: its cost is reported as unknown, never guessed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tabmem.llm.backends import is_paid

PRICE_KEYS = ("input_cost_per_token", "output_cost_per_token")
BATCH_KEYS = ("input_cost_per_token_batches", "output_cost_per_token_batches")
BATCH_DISCOUNT = 0.5  # OpenAI's and Anthropic's batch rate, where the cost map has none


CACHE_KEYS = ("cache_read_input_token_cost", "cache_creation_input_token_cost")


@dataclass(frozen=True)
class Price:
    """USD per prompt token and per completion token; prompt tokens the provider read from
    its prompt cache (``cache_read``) or wrote to it (``cache_write``) at their own prices,
    where known (else at the prompt price)."""

    input_per_token: float
    output_per_token: float
    source: str
    cache_read_per_token: float | None = None
    cache_write_per_token: float | None = None

    def cost(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> float:
        read, write = (
            self.input_per_token if rate is None else rate
            for rate in (self.cache_read_per_token, self.cache_write_per_token)
        )
        plain = max(0, prompt_tokens - cache_read_tokens - cache_write_tokens)
        return (
            plain * self.input_per_token
            + cache_read_tokens * read
            + cache_write_tokens * write
            + completion_tokens * self.output_per_token
        )

    def discounted(self, factor: float, source: str) -> Price:
        def times(value: float | None) -> float | None:
            return None if value is None else value * factor

        return Price(
            self.input_per_token * factor,
            self.output_per_token * factor,
            source,
            times(self.cache_read_per_token),
            times(self.cache_write_per_token),
        )


FREE = Price(0.0, 0.0, "runs here")


def map_price(model: str, keys: tuple[str, str] = PRICE_KEYS) -> Price | None:
    """``model``'s price in litellm's offline cost map (``keys``: the batch prices instead),
    or None when the map has none."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:
        return None
    prices = [info.get(key) for key in keys]
    if any(not isinstance(p, int | float) for p in prices):
        return None
    source = "litellm cost map" + (", batch prices" if keys == BATCH_KEYS else "")
    cache = [_number(info.get(key)) for key in CACHE_KEYS] if keys == PRICE_KEYS else [None] * 2
    return Price(float(prices[0]), float(prices[1]), source, *cache)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def unpriced_budget(name: str) -> str:
    """The sentence for a ``budget_usd`` given with model ``name``, whose price is unknown."""
    return (
        f"budget_usd needs the price of model '{name}', which litellm's cost map lacks; set "
        "input_cost_per_token and output_cost_per_token in its config."
    )


def model_price(cfg: Mapping[str, Any], batch: bool = False) -> Price | None:
    """The price of the model a config names; None when it is unknown. ``batch``: the price
    through the Batch API (the cost map's batch prices, else half the price)."""
    if any(cfg.get(key) is not None for key in PRICE_KEYS):
        given = [float(cfg.get(key) or 0.0) for key in PRICE_KEYS]
        cache = [_number(cfg.get(key)) for key in CACHE_KEYS]
        price = Price(given[0], given[1], "model config", *cache)
    elif not is_paid(str(cfg.get("backend"))):
        return FREE
    else:
        model = str(cfg["litellm_model"])
        if batch and (listed := map_price(model, BATCH_KEYS)) is not None:
            return listed
        price = map_price(model)
    if price is None or not batch:
        return price
    return price.discounted(BATCH_DISCOUNT, f"{price.source}, half for the Batch API")
