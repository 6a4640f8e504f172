"""Dollars worked out by hand from genai-prices' own per-million-token prices, for the
cost tests: what blobviewer.timeline.cost is expected to give, without calling it."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from genai_prices.data_snapshot import get_snapshot
from genai_prices.types import TieredPrices

from blobviewer.timeline.cost import TurnUsage


def prices(model_ref: str, at: datetime, provider: str | None = None):
    """The package's prices of *model_ref* at *at* (dollars per million tokens)."""
    _, model = get_snapshot().find_provider_model(model_ref, None, provider, None)
    return model.get_prices(at)


def dollars_by_hand(
    model_ref: str, usage: TurnUsage, at: datetime, provider: str | None = None
) -> Decimal:
    """Uncached input, cache reads, cache writes and output, each at its own price. Our
    input_tokens is the whole context, so the uncached part is what the cache neither
    supplied nor took."""
    price = prices(model_ref, at, provider)
    read, written = usage.cache_read_tokens or 0, usage.cache_write_tokens or 0
    context = usage.input_tokens or 0

    def rate(name: str) -> Decimal:
        value = getattr(price, name)
        value = price.input_mtok if value is None else value  # no cache price: as input
        if isinstance(value, TieredPrices):  # prices by context size: ours is under the tiers
            assert all(context <= tier.start for tier in value.tiers)
            return value.base
        return value

    total = (
        (context - read - written) * rate("input_mtok")
        + read * rate("cache_read_mtok")
        + written * rate("cache_write_mtok")
        + (usage.output_tokens or 0) * rate("output_mtok")
    )
    return total / Decimal(1_000_000)
