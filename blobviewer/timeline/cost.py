"""What a model's turns cost in US dollars (docs/cost.md): the recording's own figure
when it has one, else priced from the turn's tokens and the session's model with the
price data of the pinned `genai-prices` package.

Only the package's bundled snapshot is read: its `UpdatePrices` background updater (which
would fetch prices over the network) is never started, so pricing never leaves the
machine and gives the same figure for the same recording until the package is upgraded.

Our token fields: `input_tokens` is the whole context a turn read, cache reads and writes
included; `cache_read_tokens` and `cache_write_tokens` are the parts of it served from and
written to the prompt cache. genai-prices counts `input_tokens` the same way (it prices
`input_tokens - cache_read_tokens - cache_write_tokens` at the input rate and each cache
part at its own), so ours pass through unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from copy import copy
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from genai_prices import Usage
    from genai_prices.types import TieredPrices

# genai_prices is imported where a price is first wanted, not with this module: it takes
# 0.2 s, which every page and command that never prices anything would pay.

NO_PRICE = "no price"
# TurnUsage's fields in order: the Item columns a turn's cost is made of.
USAGE_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
)


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """One model call as an item records it: its tokens, and its cost where the
    recording gives one (which wins over any price)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None

    @property
    def has_tokens(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None

    def _usage(self) -> Usage | None:
        """These tokens as genai-prices' Usage; None when the cache parts exceed the
        context read (a recording that contradicts itself has no price)."""
        from genai_prices import Usage

        read, written = self.cache_read_tokens or 0, self.cache_write_tokens or 0
        total = self.input_tokens if self.input_tokens is not None else read + written
        if read + written > total:
            return None
        return Usage(
            input_tokens=total,
            cache_read_tokens=read,
            cache_write_tokens=written,
            output_tokens=self.output_tokens or 0,
        )


@dataclass(frozen=True, slots=True)
class SessionCost:
    """A session's cost: *usd* is None while any turn with tokens has no cost
    (*unpriced_turns* of them), or when no turn has one."""

    usd: float | None
    unpriced_turns: int


@lru_cache(maxsize=256)
def _model_ref(model: str) -> tuple[str, str | None] | None:
    """The model reference and provider genai-prices knows *model* by: as spelled, else
    without a `provider/` prefix (`openai/gpt-4o`, `deepseek/deepseek-chat`), first with
    that provider and then with any; None when it knows none of them."""
    from genai_prices import Usage, calc_price

    name = model.strip()
    candidates: list[tuple[str, str | None]] = [(name, None)]
    if "/" in name:
        prefix, rest = name.split("/", 1)
        candidates += [(rest, prefix), (rest.rsplit("/", 1)[-1], None)]
    for ref, provider in candidates:
        if not ref:
            continue
        try:
            calc_price(Usage(input_tokens=0), ref, provider_id=provider)
        except LookupError:
            continue
        return ref, provider
    return None


def has_price(model: str) -> bool:
    """Whether the price data knows *model*."""
    return bool(model.strip()) and _model_ref(model) is not None


def priced_usd(model: str, usage: TurnUsage, *, at: datetime | None = None) -> float | None:
    """What *usage* costs at *model*'s prices in force at *at* (now when None); None for
    a model the price data does not know, or no tokens to price."""
    price = _price(model, usage, at)
    return None if price is None else float(price)


def _price(model: str, usage: TurnUsage, at: datetime | None) -> Decimal | None:
    from genai_prices import calc_price

    ref = _model_ref(model) if model.strip() else None
    tokens = usage._usage() if usage.has_tokens else None
    if ref is None or tokens is None:
        return None
    try:
        calculation = calc_price(tokens, ref[0], provider_id=ref[1], genai_request_timestamp=at)
    except (LookupError, ValueError):
        return None
    return calculation.total_price


def turn_cost(
    model: str, usages: Iterable[TurnUsage], *, at: datetime | None = None
) -> float | None:
    """A turn's cost: the sum over its model calls of each one's recorded cost, else its
    price; None when a call with tokens has neither, or none has a cost."""
    total, unpriced, any_cost = _sum(model, list(usages), at)
    return float(total) if any_cost and not unpriced else None


def session_cost(
    model: str,
    usages: Iterable[TurnUsage],
    *,
    at: datetime | None = None,
    recorded: float | None = None,
) -> SessionCost:
    """A session's cost: *recorded* (the recording's own total) when given; else the sum
    of its turns' costs (see turn_cost), None while any turn is unpriced."""
    usages = list(usages)
    if recorded is not None:
        return SessionCost(recorded, 0)
    total, unpriced, any_cost = _sum(model, usages, at)
    return SessionCost(float(total) if any_cost and not unpriced else None, unpriced)


def _sum(model: str, usages: list[TurnUsage], at: datetime | None) -> tuple[Decimal, int, bool]:
    """(the cost of *usages* that have one, how many with tokens have none, whether any
    has one). Calls to price are priced a few sums at a time (see _priced_by_tier)
    rather than one calculation per call."""
    total, unpriced, any_cost = Decimal(0), 0, False
    to_price: list[TurnUsage] = []
    for usage in usages:
        if usage.cost_usd is not None:
            total += Decimal(repr(usage.cost_usd))
            any_cost = True
        elif usage.has_tokens:
            to_price.append(usage)
    if not to_price:
        return total, unpriced, any_cost
    prices = _priced_by_tier(model, to_price, at)
    if prices is None:
        prices = [_price(model, usage, at) for usage in to_price]
    for price in prices:
        if price is None:
            unpriced += 1
        else:
            total += price
            any_cost = True
    return total, unpriced, any_cost


def _priced_by_tier(
    model: str, usages: list[TurnUsage], at: datetime | None
) -> list[Decimal | None] | None:
    """The prices of *usages*, from one calculation per price tier they fall in: the sum of
    a tier's calls first, then 0 for each of its other calls. None when a usage has no
    price or the model charges per request.

    A model's price per token is the same for every call whose context passes the same
    tier thresholds (a tier applies to all of a call's tokens by the call's input tokens,
    the cliff model genai-prices follows), so those calls cost what their summed tokens
    cost at that tier's prices. Pricing one call takes genai-prices about 0.2 ms, and a
    long session has thousands."""
    from genai_prices import calc_price
    from genai_prices.types import TieredPrices

    ref = _model_ref(model) if model.strip() else None
    read = [usage._usage() for usage in usages]
    tokens = [usage for usage in read if usage is not None]
    if ref is None or len(usages) < 2 or len(tokens) < len(read):
        return None
    try:
        found = calc_price(_summed(tokens), ref[0], provider_id=ref[1], genai_request_timestamp=at)
    except (LookupError, ValueError):
        return None
    model_price = found.model_price
    values = vars(model_price)
    if values.get("requests_kcount") is not None:
        return None
    tiered = {name: value for name, value in values.items() if isinstance(value, TieredPrices)}
    if not tiered:  # one price per token whatever the size: the sum's price is the answer
        return [found.total_price, *([Decimal(0)] * (len(usages) - 1))]
    starts = sorted({tier.start for value in tiered.values() for tier in value.tiers})
    by_tier: dict[int, list[int]] = {}
    for index, usage in enumerate(tokens):
        passed = sum(_input_tokens(usage) > start for start in starts)
        by_tier.setdefault(passed, []).append(index)
    prices: list[Decimal | None] = [Decimal(0)] * len(usages)
    for indexes in by_tier.values():
        context = _input_tokens(tokens[indexes[0]])
        at_tier = copy(model_price)  # its tiered prices resolved to this tier's, as a call's are
        at_tier.__dict__.update(
            {name: _tier_price(value, context) for name, value in tiered.items()}
        )
        summed = _summed([tokens[index] for index in indexes])
        prices[indexes[0]] = at_tier.calc_price(summed)["total_price"]
    return prices


def _summed(usages: Sequence[Usage]) -> Usage:
    from genai_prices import Usage

    fields = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
    return Usage(**{name: sum(getattr(usage, name) or 0 for usage in usages) for name in fields})


def _input_tokens(usage: Usage) -> int:
    return int(usage.input_tokens or 0)


def _tier_price(prices: TieredPrices, context: int) -> Decimal:
    """The price per token of *prices* for a call that read *context* input tokens: the
    highest tier it passes, else the base price (genai-prices' rule)."""
    for tier in reversed(prices.tiers):
        if context > tier.start:
            return tier.price
    return prices.base


def format_usd(value: float | None) -> str:
    """Dollars as the pages show them: cents from a dollar up (`$8.37`, `$1,204.50`),
    two significant figures below (`$0.37`, `$0.0072`), `< $0.0001` below a hundredth of
    a cent, `$0` for nothing; "" for None."""
    if value is None or not math.isfinite(value):
        return ""
    if value == 0:
        return "$0"
    if value >= 1:
        return f"${value:,.2f}"
    if value < 0.0001:
        return "< $0.0001"
    digits = 1 - math.floor(math.log10(value))  # decimals that keep two significant figures
    return f"${value:.{digits}f}"


@dataclass(frozen=True, slots=True)
class CostShown:
    """A cost as a page shows it: *text* (dollars, NO_PRICE, or "" when there is nothing
    to price) and a *title* that says where the figure comes from."""

    text: str
    title: str = ""

    @property
    def css(self) -> str:
        """The class of its element: `cost`, and `no-price` when there is none."""
        return "cost no-price" if self.text == NO_PRICE else "cost"


def turn_cost_shown(model: str, usages: list[TurnUsage], *, at: datetime | None) -> CostShown:
    """A turn's cost on the timeline (see turn_cost)."""
    if not usages:
        return CostShown("")
    cost = turn_cost(model, usages, at=at)
    if cost is None:
        return CostShown(NO_PRICE, _no_price_title(model))
    if all(usage.cost_usd is not None for usage in usages):
        return CostShown(format_usd(cost), "the cost the recording gives for this turn")
    return CostShown(format_usd(cost), f"this turn's tokens at {_prices_of(model)}")


def session_cost_shown(cost_usd: float | None, unpriced_turns: int, model: str) -> CostShown:
    """A session's stored cost (Session.cost_usd, unpriced_turns) as its page and the
    session list show it."""
    if cost_usd is not None:
        title = f"the recording's own cost, else its turns' tokens at {_prices_of(model)}"
        return CostShown(format_usd(cost_usd), title)
    if unpriced_turns:
        turns = f"{unpriced_turns} turn{'s' if unpriced_turns != 1 else ''}"
        return CostShown(NO_PRICE, f"{_no_price_title(model)} ({turns} with tokens)")
    return CostShown("")


def _prices_of(model: str) -> str:
    return f"{model}'s prices (genai-prices {prices_version()}), cache reads and writes apart"


def _no_price_title(model: str) -> str:
    if not model.strip():
        return "no model recorded, so its tokens have no price"
    return f"genai-prices {prices_version()} has no price for {model}"


@lru_cache(maxsize=1)
def prices_version() -> str:
    """The version of genai-prices whose bundled prices are used."""
    from importlib.metadata import version

    return version("genai-prices")
