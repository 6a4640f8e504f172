"""The facts at the top of a session are true: times, duration, steps, errors, status,
per-turn tokens and step durations, from the recording itself, filled at ingest (and for
sessions recorded before, by migration 0005). Every expected number is worked out here
from the raw recording, not taken from the importers."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.utils import timezone

from blobviewer.models import Item, Session
from importers.recordings import (
    CLAUDE_CODE,
    CLAUDE_SESSION,
    MINI_SWE_AGENT,
    SWE_AGENT_CLASSIC,
    claude_line,
    write_jsonl,
)
from web.records import SampleSession, header, tool_result_item, user_item

pytestmark = pytest.mark.django_db


def ingest(*paths: Path) -> str:
    out = StringIO()
    call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=out)
    return out.getvalue()


def copied(fixture: Path, tmp_path: Path) -> Path:
    path = tmp_path / fixture.name
    shutil.copyfile(fixture, path)
    return path


def iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def durations(session: Session) -> dict[str, timedelta | None]:
    return dict(session.items.filter(type="tool_result").values_list("call_id", "duration"))


def turn_tokens(session: Session) -> list[tuple[int, int, int]]:
    return list(
        session.items.filter(type="assistant", input_tokens__isnull=False)
        .order_by("seq")
        .values_list("input_tokens", "output_tokens", "context_tokens")
    )


# --- Claude Code -----------------------------------------------------------------------------


def test_a_claude_code_sessions_facts_come_from_its_lines(tmp_path, data_dir) -> None:
    entries = [json.loads(line) for line in CLAUDE_CODE.read_text().splitlines() if line.strip()]
    item_lines = [e for e in entries if e.get("type") in ("user", "assistant", "system")]
    called: dict[str, datetime] = {}
    for entry in item_lines:
        if entry["type"] == "assistant":
            for block in entry["message"]["content"]:
                if block.get("type") == "tool_use":
                    called.setdefault(block["id"], iso(entry["timestamp"]))
    results = [
        (block, iso(entry["timestamp"]))
        for entry in item_lines
        if entry["type"] == "user" and isinstance(entry["message"]["content"], list)
        for block in entry["message"]["content"]
        if block.get("type") == "tool_result"
    ]
    last = [e for e in item_lines if e["type"] == "assistant" and not e.get("isSidechain")][-1]
    stop_reasons = [
        e["message"]["stop_reason"]
        for e in item_lines
        if e["type"] == "assistant"
        and e["message"].get("id") == last["message"]["id"]
        and e["message"].get("stop_reason")
    ]

    ingest(copied(CLAUDE_CODE, tmp_path))

    session = Session.objects.get(id=CLAUDE_SESSION)
    times = [iso(e["timestamp"]) for e in item_lines]
    assert (session.started_at, session.ended_at) == (min(times), max(times))
    assert session.duration == max(times) - min(times)
    assert session.step_count == sum(1 for b, _ in results if b["tool_use_id"] in called) == 108
    assert session.error_count == sum(1 for b, _ in results if b.get("is_error") is True) == 4
    assert session.status == (stop_reasons[0] if stop_reasons else "")
    assert durations(session) == {
        b["tool_use_id"]: at - called[b["tool_use_id"]] if at >= called[b["tool_use_id"]] else None
        for b, at in results
    }


def test_a_claude_code_messages_usage_counts_once_on_its_first_line(tmp_path, data_dir) -> None:
    # One API message is written over several lines with the same message.id, each with a
    # copy of its usage; the output count grows to its final value on the last line.
    first: dict[str, dict[str, Any]] = {}
    output: dict[str, int] = {}
    for line in CLAUDE_CODE.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message") if entry.get("type") == "assistant" else None
        if isinstance(message, dict) and isinstance(message.get("usage"), dict):
            first.setdefault(message["id"], message["usage"])
            output[message["id"]] = max(
                output.get(message["id"], 0), message["usage"]["output_tokens"]
            )
    expected = [
        (
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"],
            output[message_id],
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"],
        )
        for message_id, u in first.items()
    ]

    ingest(copied(CLAUDE_CODE, tmp_path))

    session = Session.objects.get(id=CLAUDE_SESSION)
    assert turn_tokens(session) == expected
    assert len(expected) == 103 < session.items.filter(type="assistant").count()


def test_a_grown_claude_code_log_completes_a_turns_output_tokens_without_counting_twice(
    tmp_path, data_dir
) -> None:
    def part(block: dict, output_tokens: int, at: str) -> dict:
        usage = {"input_tokens": 10, "cache_read_input_tokens": 500, "output_tokens": output_tokens}
        message = {"id": "msg_1", "role": "assistant", "content": [block], "usage": usage}
        return claude_line("assistant", [block], message=message, timestamp=at)

    text = {"type": "text", "text": "Let me look."}
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    path = write_jsonl(tmp_path / "s.jsonl", [part(text, 2, "2025-01-01T10:00:00Z")])
    ingest(path)
    with path.open("a") as log:
        log.write(json.dumps(part(call, 90, "2025-01-01T10:00:01Z")) + "\n")

    ingest(path)

    session = Session.objects.get(id=CLAUDE_SESSION)
    assert turn_tokens(session) == [(510, 90, 510)]
    assert session.items.count() == 2


def test_claude_codes_status_is_the_last_turns_stop_reason(tmp_path, data_dir) -> None:
    def turn(text: str, stop_reason: str | None, **extra: Any) -> dict:
        message = {
            "id": f"msg_{text}",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason,
        }
        return claude_line("assistant", message["content"], message=message, **extra)

    path = write_jsonl(
        tmp_path / "s.jsonl",
        [turn("a", "tool_use"), turn("b", "end_turn"), turn("c", None, isSidechain=True)],
    )

    ingest(path)

    assert Session.objects.get(id=CLAUDE_SESSION).status == "end_turn"


# --- mini-swe-agent (OpenAI chat messages) ----------------------------------------------------


def _millis(seconds: float) -> datetime:
    # Times are recorded to the millisecond (ISO 8601 with milliseconds).
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def test_a_mini_swe_agent_runs_facts_come_from_its_messages(tmp_path, data_dir) -> None:
    document = json.loads(MINI_SWE_AGENT.read_text())
    messages = document["messages"]
    extras = [m.get("extra") if isinstance(m.get("extra"), dict) else {} for m in messages]
    times = [_millis(x["timestamp"]) for x in extras if "timestamp" in x]
    called = {
        call["id"]: _millis(x["timestamp"])
        for m, x in zip(messages, extras, strict=True)
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    }
    tools = [(m, x) for m, x in zip(messages, extras, strict=True) if m["role"] == "tool"]
    usages = [
        x["response"]["usage"]
        for m, x in zip(messages, extras, strict=True)
        if m["role"] == "assistant"
    ]

    ingest(copied(MINI_SWE_AGENT, tmp_path))

    session = Session.objects.get(source_format="openai_chat")
    assert (session.started_at, session.ended_at) == (min(times), max(times))
    assert session.duration == max(times) - min(times)
    assert session.step_count == sum(1 for m, _ in tools if m["tool_call_id"] in called) == 72
    assert session.error_count == sum(
        1 for _, x in tools if x.get("returncode") != 0 or x.get("exception_info")
    )
    assert session.error_count > 0
    assert session.status == document["info"]["exit_status"] == "Submitted"
    assert turn_tokens(session) == [
        (u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens"]) for u in usages
    ]
    assert durations(session) == {
        m["tool_call_id"]: _millis(x["timestamp"]) - called[m["tool_call_id"]] for m, x in tools
    }


# --- SWE-agent (classic trajectory) -----------------------------------------------------------


def test_a_swe_agent_trajectory_without_times_has_none_and_sorts_by_its_ingest_time(
    tmp_path, data_dir
) -> None:
    document = json.loads(SWE_AGENT_CLASSIC.read_text())
    assert not any("timestamp" in step for step in document["trajectory"])
    path = copied(SWE_AGENT_CLASSIC, tmp_path)
    # An old modification time must not pass for the time the run started.
    old = datetime(2001, 1, 1, tzinfo=UTC).timestamp()
    os.utime(path, (old, old))
    before = timezone.now()

    ingest(path)

    after = timezone.now()
    session = Session.objects.get(source_format="swe_agent")
    assert (session.started_at, session.ended_at, session.duration) == (None, None, None)
    assert before <= session.created_at <= after
    steps = [s for s in document["trajectory"] if isinstance(s.get("action"), str)]
    assert session.step_count == len(steps) == 12
    assert session.error_count == 0  # a classic trajectory marks no result as failed
    assert session.status == document["info"]["exit_status"] == "submitted"
    assert session.meta["model_stats"] == document["info"]["model_stats"]
    assert not session.items.filter(input_tokens__isnull=False).exists()
    assert not session.items.filter(duration__isnull=False).exists()

    # Ingested again, it keeps the time it was first ingested.
    ingest(path)
    assert Session.objects.get(id=session.id).created_at == session.created_at


# --- our own session logs --------------------------------------------------------------------


def test_our_own_logs_facts(sample_session: SampleSession) -> None:
    lines = [json.loads(line) for line in sample_session.path.read_text().splitlines()]
    head, records = lines[0], lines[1:]
    at = {r["seq"]: iso(r["at"]) for r in records}
    call_seq = {
        c["id"]: r["seq"] for r in records if r["type"] == "assistant" for c in r["tool_calls"]
    }

    session = sample_session.session

    assert session.started_at == min(iso(head["created_at"]), *at.values())
    assert session.ended_at == max(at.values())
    assert session.duration == session.ended_at - session.started_at
    results = [r for r in records if r["type"] == "tool_result"]
    assert session.step_count == sum(1 for r in results if r["call_id"] in call_seq) == 3
    assert session.error_count == 0 and session.status == ""
    assert durations(session) == {
        r["call_id"]: at[r["seq"]] - at[call_seq[r["call_id"]]]
        if r["call_id"] in call_seq
        else None
        for r in results
    }
    assert not session.items.filter(input_tokens__isnull=False).exists()  # it records none


def test_a_grown_log_keeps_the_session_totals_right(write_log) -> None:
    session_id = uuid.uuid4()

    def call(seq: int, call_id: str, at: str) -> dict:
        return {
            "type": "assistant",
            "seq": seq,
            "at": at,
            "text": "",
            "tool_calls": [{"id": call_id, "name": "run", "arguments": {}}],
        }

    first = [
        header(session_id),
        user_item(1, "go"),
        call(2, "a", "2025-05-01T12:00:01+00:00"),
        tool_result_item(3, "ok", call_id="a"),
    ]
    path = write_log(first)
    ingest(path)
    session = Session.objects.get(id=session_id)
    assert (session.step_count, session.error_count) == (1, 0)
    assert session.ended_at == iso("2025-05-01T12:00:02+00:00")

    failed = {**tool_result_item(5, "boom", call_id="b"), "is_error": True}
    failed["at"] = "2025-05-01T12:10:00+00:00"
    path.write_text(
        path.read_text()
        + json.dumps(call(4, "b", "2025-05-01T12:09:00+00:00"))
        + "\n"
        + json.dumps(failed)
        + "\n"
    )
    ingest(path)

    session = Session.objects.get(id=session_id)
    assert (session.step_count, session.error_count) == (2, 1)
    assert session.started_at == iso("2025-05-01T12:00:00+00:00")  # the header's time
    assert session.ended_at == iso("2025-05-01T12:10:00+00:00")
    assert session.duration == timedelta(minutes=10)
    assert durations(session) == {"a": timedelta(seconds=1), "b": timedelta(minutes=1)}


# --- sessions recorded before the facts existed (migration 0005) -------------------------------


def test_the_migration_fills_the_facts_of_sessions_recorded_before(data_dir) -> None:
    migration = importlib.import_module("blobviewer.migrations.0005_team_server_and_timeline")
    start = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    mtime = datetime(2019, 1, 1, tzinfo=UTC)
    ingested = datetime(2025, 6, 1, tzinfo=UTC)
    ours = Session.objects.create(id=uuid.uuid4(), created_at=start, source_format="blobviewer")
    Item.objects.bulk_create(
        [
            Item(session=ours, seq=1, type="user", at=start, text="go"),
            Item(
                session=ours,
                seq=2,
                type="assistant",
                at=start + timedelta(seconds=5),
                tool_calls=[{"id": "a", "name": "run", "arguments": {}}],
            ),
            Item(
                session=ours,
                seq=3,
                type="tool_result",
                at=start + timedelta(seconds=65),
                call_id="a",
                is_error=True,
            ),
            Item(session=ours, seq=4, type="tool_result", at=None, call_id="nobody-called-me"),
        ]
    )
    traj = Session.objects.create(
        id=uuid.uuid4(),
        created_at=mtime,  # what the importer took when the recording had no times
        source_format="swe_agent",
        meta={"exit_status": "submitted"},
    )
    Session.objects.filter(id=traj.id).update(ingested_at=ingested)
    Item.objects.create(
        session=traj, seq=1, type="assistant", tool_calls=[{"id": "step-1", "name": "ls"}]
    )
    Item.objects.create(session=traj, seq=2, type="tool_result", call_id="step-1")

    migration.fill_session_facts(apps, None)

    ours = Session.objects.get(id=ours.id)
    assert (ours.started_at, ours.ended_at) == (start, start + timedelta(seconds=65))
    assert ours.duration == timedelta(seconds=65)
    assert (ours.step_count, ours.error_count, ours.status) == (1, 1, "")
    assert ours.importer_version == 1  # derived as before: no rebuild needed
    assert durations(ours) == {"a": timedelta(seconds=60), "nobody-called-me": None}
    traj = Session.objects.get(id=traj.id)
    assert (traj.started_at, traj.ended_at, traj.duration) == (None, None, None)
    assert (traj.step_count, traj.error_count, traj.status) == (1, 0, "submitted")
    assert traj.importer_version == 0  # tokens and source digests need a rebuild
    assert traj.created_at == ingested  # no longer the file's modification time
