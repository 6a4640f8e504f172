"""Pricing a turn's tokens (blobviewer.timeline.cost): expected dollars are worked out here
from genai-prices' own per-million-token prices, never typed in, so the tests hold for
the pinned price data and say what the arithmetic is."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

import pytest
from genai_prices.data_snapshot import get_snapshot

from blobviewer.timeline.cost import (
    NO_PRICE,
    TurnUsage,
    format_usd,
    has_price,
    priced_usd,
    session_cost,
    turn_cost,
    turn_cost_shown,
)
from web.prices import dollars_by_hand
from web.prices import prices as prices_at

AT = datetime(2026, 1, 15, tzinfo=UTC)


def prices(model_ref: str, provider: str | None = None):
    return prices_at(model_ref, AT, provider)


def by_hand(model_ref: str, usage: TurnUsage, provider: str | None = None) -> float:
    return float(dollars_by_hand(model_ref, usage, AT, provider))


TURN = TurnUsage(
    input_tokens=21_003, cache_read_tokens=20_000, cache_write_tokens=1_000, output_tokens=250
)


@pytest.mark.parametrize(
    ("model", "ref", "provider"),
    [
        ("claude-opus-4-6", "claude-opus-4-6", None),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet-20241022", None),
        ("gpt-4o", "gpt-4o", None),
        ("openai/gpt-4o", "gpt-4o", "openai"),
        ("deepseek/deepseek-chat", "deepseek-chat", "deepseek"),
    ],
)
def test_a_known_model_prices_cache_reads_and_writes_apart(model, ref, provider):
    assert priced_usd(model, TURN, at=AT) == pytest.approx(by_hand(ref, TURN, provider), rel=1e-12)


def test_cache_reads_cost_less_than_the_same_tokens_uncached():
    price = prices("gpt-4o")
    assert price.cache_read_mtok < price.input_mtok and price.cache_write_mtok is None
    uncached = TurnUsage(input_tokens=21_003, output_tokens=250)
    cached = TurnUsage(input_tokens=21_003, cache_read_tokens=20_000, output_tokens=250)
    assert priced_usd("gpt-4o", cached, at=AT) < priced_usd("gpt-4o", uncached, at=AT)
    # 20,000 tokens read from the cache save the difference of the two prices on each.
    saved = 20_000 * (price.input_mtok - price.cache_read_mtok)
    difference = priced_usd("gpt-4o", uncached, at=AT) - priced_usd("gpt-4o", cached, at=AT)
    assert difference == pytest.approx(float(saved / 1_000_000), rel=1e-12)


def test_an_unknown_model_has_no_price_rather_than_a_guess():
    assert not has_price("acme-llm-7")
    assert not has_price("")
    assert priced_usd("acme-llm-7", TURN, at=AT) is None
    assert turn_cost("acme-llm-7", [TURN], at=AT) is None
    shown = turn_cost_shown("acme-llm-7", [TURN], at=AT)
    assert shown.text == NO_PRICE
    assert "acme-llm-7" in shown.title


def test_cache_parts_larger_than_the_context_read_have_no_price():
    assert priced_usd("gpt-4o", TurnUsage(input_tokens=10, cache_read_tokens=11), at=AT) is None


def test_a_recorded_cost_wins_over_the_price():
    recorded = TurnUsage(input_tokens=21_003, output_tokens=250, cost_usd=0.5)
    assert turn_cost("claude-opus-4-6", [recorded], at=AT) == 0.5
    assert turn_cost("acme-llm-7", [recorded], at=AT) == 0.5  # no price needed
    assert turn_cost_shown("acme-llm-7", [recorded], at=AT).text == "$0.50"


def test_a_session_sums_its_turns_and_priced_together_equals_priced_one_by_one():
    turns = [
        TurnUsage(input_tokens=1_000 * n, cache_read_tokens=500 * n, output_tokens=20 * n)
        for n in range(1, 40)
    ]
    for model in ("claude-opus-4-6", "gpt-4o", "claude-sonnet-4-5"):  # the last has tiers
        one_by_one = sum(priced_usd(model, turn, at=AT) for turn in turns)
        cost = session_cost(model, turns, at=AT)
        assert cost.usd == pytest.approx(one_by_one, rel=1e-12)
        assert cost.unpriced_turns == 0


def test_turns_on_both_sides_of_a_price_tier_are_priced_once_a_tier(monkeypatch):
    """claude-sonnet-4-5 charges more per token for a call over 200,000 input tokens. A
    session of such calls is priced in two sums, one per tier, and costs what its turns
    cost one by one."""
    import genai_prices
    from genai_prices.types import ModelPrice, TieredPrices

    tiers = prices("claude-sonnet-4-5").input_mtok
    assert isinstance(tiers, TieredPrices) and [tier.start for tier in tiers.tiers] == [200_000]
    turns = [
        TurnUsage(input_tokens=150_000 + 20_000 * n, cache_read_tokens=90_000, output_tokens=n)
        for n in range(1, 30)
    ]  # 170,000 to 730,000: two under the tier, the rest over
    one_by_one = sum(priced_usd("claude-sonnet-4-5", turn, at=AT) for turn in turns)
    calculations = []
    for owner, name in ((genai_prices, "calc_price"), (ModelPrice, "calc_price")):
        original = getattr(owner, name)

        def counted(*args, _original=original, **kwargs):
            calculations.append(args)
            return _original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)
    cost = session_cost("claude-sonnet-4-5", turns, at=AT)
    assert cost.usd == pytest.approx(one_by_one, rel=1e-12)
    assert cost.unpriced_turns == 0
    assert len(calculations) <= 4  # the model's prices once, then a sum for each tier
    # The tiers differ, so pricing a tier's calls at the other's price would not add up.
    per_token = [
        priced_usd("claude-sonnet-4-5", TurnUsage(input_tokens=n), at=AT) / n
        for n in (190_000, 210_000)
    ]
    assert per_token[1] > per_token[0]


def test_a_session_with_an_unpriced_turn_has_no_cost_but_counts_it():
    turns = [TURN, TurnUsage(cost_usd=0.25), TurnUsage(output_tokens=7)]
    assert session_cost("claude-opus-4-6", turns, at=AT).usd is not None
    cost = session_cost("acme-llm-7", turns, at=AT)
    assert (cost.usd, cost.unpriced_turns) == (None, 2)  # not $0.25: that is only a part


def test_the_header_cost_wins_over_the_sum():
    cost = session_cost("acme-llm-7", [TURN], at=AT, recorded=1.25)
    assert (cost.usd, cost.unpriced_turns) == (1.25, 0)


@pytest.mark.parametrize(
    ("dollars", "text"),
    [
        (8.3698, "$8.37"),
        (1204.5, "$1,204.50"),
        (0.37, "$0.37"),
        (0.0072, "$0.0072"),
        (0.012345, "$0.012"),
        (0.00004, "< $0.0001"),
        (0.0, "$0"),
        (None, ""),
    ],
)
def test_dollars_read_as_cents_from_a_dollar_and_two_figures_below(dollars, text):
    assert format_usd(dollars) == text


def test_pricing_never_reaches_the_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pricing opened a connection")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    assert priced_usd("claude-haiku-4-5", TURN, at=AT) is not None
    snapshot = get_snapshot()
    assert not snapshot.from_auto_update  # the bundled prices, not an updater's
