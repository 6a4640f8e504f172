"""What ingest records of cost (docs/cost.md): each turn's tokens with the cache's parts,
the recording's own cost where it has one, and the session's cost from them, kept right
as a recording grows. Expected dollars are worked out from the raw recording and
genai-prices' own prices (web.prices), not taken from the code under test."""

from __future__ import annotations

import json
import shutil
import uuid
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Item, Session
from blobviewer.timeline.cost import TurnUsage
from importers.recordings import CLAUDE_CODE, CLAUDE_SESSION, MINI_SWE_AGENT, claude_line
from web.prices import dollars_by_hand
from web.records import header, user_item

pytestmark = pytest.mark.django_db

CODEX = next((CLAUDE_CODE.parent / "codex").glob("rollout-*.jsonl"))


def ingest(*paths: Path) -> str:
    out = StringIO()
    call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=out)
    return out.getvalue()


def copied(fixture: Path, tmp_path: Path) -> Path:
    path = tmp_path / fixture.name
    shutil.copyfile(fixture, path)
    return path


def claude_usages(path: Path) -> tuple[str, list[TurnUsage]]:
    """The model and each API message's usage, read from the raw log: its first line's
    input and cache counts, the largest output any of its lines recorded."""
    model, first, output = "", {}, {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message")
        if entry.get("type") != "assistant" or "usage" not in message:
            continue
        model = model or message["model"]
        first.setdefault(message["id"], message["usage"])
        output[message["id"]] = max(output.get(message["id"], 0), message["usage"]["output_tokens"])
    turns = []
    for message_id, usage in first.items():
        read, written = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
        turns.append(
            TurnUsage(
                input_tokens=usage["input_tokens"] + read + written,
                output_tokens=output[message_id],
                cache_read_tokens=read,
                cache_write_tokens=written,
            )
        )
    return model, turns


def test_a_real_claude_code_session_costs_its_messages_tokens_at_the_models_prices(
    tmp_path, data_dir
) -> None:
    path = copied(CLAUDE_CODE, tmp_path)
    model, usages = claude_usages(path)

    ingest(path)

    session = Session.objects.get(id=CLAUDE_SESSION)
    assert session.model == model
    expected = sum(dollars_by_hand(model, u, session.started_at) for u in usages)
    assert session.cost_usd == pytest.approx(float(expected), rel=1e-9)
    assert session.unpriced_turns == 0
    stored = session.items.filter(input_tokens__isnull=False).order_by("seq")
    assert list(stored.values_list("cache_read_tokens", "cache_write_tokens")) == [
        (u.cache_read_tokens, u.cache_write_tokens) for u in usages
    ]


def test_a_real_codex_rollout_costs_its_responses_tokens_with_cached_input_apart(
    tmp_path, data_dir
) -> None:
    path = copied(CODEX, tmp_path)
    ingest(path)

    session = Session.objects.get()
    usages = [
        TurnUsage(input_tokens=i, output_tokens=o, cache_read_tokens=c)
        for i, o, c in session.items.filter(input_tokens__isnull=False).values_list(
            "input_tokens", "output_tokens", "cache_read_tokens"
        )
    ]
    assert sum(u.cache_read_tokens for u in usages) > 0
    expected = sum(dollars_by_hand(session.model, u, session.started_at) for u in usages)
    assert session.cost_usd == pytest.approx(float(expected), rel=1e-9)


def test_the_recordings_own_total_wins_over_the_price(tmp_path, data_dir) -> None:
    document = json.loads(MINI_SWE_AGENT.read_text())
    ingest(copied(MINI_SWE_AGENT, tmp_path))

    session = Session.objects.get()
    assert session.cost_usd == document["info"]["model_stats"]["instance_cost"]


def test_a_lines_cost_usd_wins_over_the_price_of_its_tokens(tmp_path, data_dir) -> None:
    def line(n: int, cost: float | None) -> dict:
        message = {
            "id": f"msg_{n}",
            "role": "assistant",
            "model": "claude-3-5-sonnet-20241022",
            "content": [{"type": "text", "text": f"turn {n}"}],
            "usage": {"input_tokens": 1_000, "output_tokens": 100},
        }
        extra = {} if cost is None else {"costUSD": cost}
        return claude_line("assistant", message["content"], message=message, uuid=f"a{n}", **extra)

    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(line(1, 0.5)) + "\n" + json.dumps(line(2, None)) + "\n")
    ingest(path)

    session = Session.objects.get(id=CLAUDE_SESSION)
    first, second = session.items.order_by("seq")
    assert (first.cost_usd, second.cost_usd) == (0.5, None)
    priced = dollars_by_hand(
        "claude-3-5-sonnet-20241022",
        TurnUsage(input_tokens=1_000, output_tokens=100),
        session.started_at,
    )
    assert session.cost_usd == pytest.approx(float(Decimal("0.5") + priced), rel=1e-12)


def test_an_unknown_model_leaves_the_session_without_a_cost_and_the_page_says_no_price(
    tmp_path, data_dir, logged_in_client
) -> None:
    message = {
        "id": "msg_1",
        "role": "assistant",
        "model": "acme-llm-7",
        "content": [{"type": "text", "text": "hello"}],
        "usage": {"input_tokens": 1_000, "output_tokens": 100},
    }
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(claude_line("assistant", message["content"], message=message)))
    ingest(path)

    session = Session.objects.get(id=CLAUDE_SESSION)
    assert (session.cost_usd, session.unpriced_turns) == (None, 1)
    page = logged_in_client.get(session.get_absolute_url()).content.decode()
    assert '<dd class="cost no-price"' in page
    assert '<span class="cost no-price"' in page  # the turn's
    listed = logged_in_client.get(reverse("session_list")).content.decode()
    assert "no price" in listed


def test_a_grown_log_prices_the_usage_its_later_lines_complete(tmp_path, data_dir) -> None:
    """A resumed read of a grown Claude Code log: the message's first item gets the cache
    counts its later line adds, and the session's cost follows."""
    model = "claude-3-5-sonnet-20241022"

    def part(block: dict, usage: dict, n: int) -> dict:
        message = {"id": "msg_1", "role": "assistant", "model": model, "content": [block]}
        return claude_line("assistant", [block], message={**message, "usage": usage}, uuid=f"{n}")

    text = {"type": "text", "text": "Let me look."}
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(part(text, {"input_tokens": 10}, 1)) + "\n")
    ingest(path)
    later = {
        "input_tokens": 10,
        "cache_read_input_tokens": 5_000,
        "cache_creation_input_tokens": 300,
        "output_tokens": 40,
    }
    with path.open("a") as log:
        log.write(json.dumps(part(call, later, 2)) + "\n")

    ingest(path)

    session = Session.objects.get(id=CLAUDE_SESSION)
    item = session.items.get(seq=1)
    assert (item.cache_read_tokens, item.cache_write_tokens) == (5_000, 300)
    usage = TurnUsage(
        input_tokens=5_310, output_tokens=40, cache_read_tokens=5_000, cache_write_tokens=300
    )
    expected = dollars_by_hand(model, usage, session.started_at)
    assert session.cost_usd == pytest.approx(float(expected), rel=1e-12)


def test_a_headers_cost_usd_wins_over_the_sum_of_the_items(tmp_path, data_dir) -> None:
    """How the ATIF importer gives a trajectory's total: `cost_usd` in the header."""
    session_id = uuid.uuid4()
    turn = {
        "type": "assistant",
        "seq": 2,
        "at": None,
        "text": "done",
        "input_tokens": 1_000,
        "output_tokens": 10,
        "cost_usd": 0.01,
    }
    head = {**header(session_id), "model": "gpt-4o", "cost_usd": 2.5}
    ingest_session(head, [user_item(1, "go"), turn], source_path="t.jsonl", store=blob_store())

    session = Session.objects.get(id=session_id)
    assert session.cost_usd == 2.5
    assert Item.objects.get(seq=2).cost_usd == 0.01
