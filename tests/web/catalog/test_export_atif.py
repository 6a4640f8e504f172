"""`manage.py sessions export SESSION --format atif`: a valid ATIF v1.7 trajectory of any
session; promoted outputs as their summaries, or whole with --inline-blobs."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from blobviewer.data_dir import blob_store
from blobviewer.models import Item, Session
from web.catalog.atif_spec import atif_problems

pytestmark = pytest.mark.django_db

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
CLAUDE_RUN = REAL / "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"  # 57 promoted outputs
CLAUDE_RUN_ID = "a7da6a22-facc-4fcd-8bab-f83c87862004"


def export(session_id: str, *options: str) -> tuple[dict[str, Any], str]:
    """The exported document, read back, and what the command said on stderr."""
    out, err = StringIO(), StringIO()
    call_command("sessions", "export", session_id, *options, stdout=out, stderr=err)
    return json.loads(out.getvalue()), err.getvalue()


@pytest.fixture
def claude_run(data_dir: Path) -> Session:
    call_command("ingest", str(CLAUDE_RUN), stdout=StringIO())
    return Session.objects.get(id=CLAUDE_RUN_ID)


def make_session(items: list[dict[str, Any]], **fields: Any) -> Session:
    """A session of hand-made items (seq from 1, in order)."""
    session = Session.objects.create(
        id=uuid.uuid4(), created_at=datetime(2026, 1, 2, tzinfo=UTC), **fields
    )
    for seq, item in enumerate(items, start=1):
        Item.objects.create(session=session, seq=seq, **item)
    return session


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def test_an_export_of_a_real_recording_is_valid_atif(claude_run):
    document, _ = export(CLAUDE_RUN_ID, "--format", "atif")

    assert atif_problems(document) == []
    assert document["session_id"] == CLAUDE_RUN_ID
    assert document["agent"] == {
        "name": "claude_code",
        "version": "unknown",
        "model_name": "claude-opus-4-5-20251101",
    }
    assert document["extra"]["title"] == claude_run.title
    # One step per user or assistant item; each call's result in its own step.
    items = claude_run.items
    assert len(document["steps"]) == items.exclude(type="tool_result").count()
    results = [r for s in document["steps"] for r in s.get("observation", {}).get("results", [])]
    assert len(results) == items.filter(type="tool_result").count() == 108
    assert document["final_metrics"]["total_steps"] == len(document["steps"])


def test_each_result_follows_its_call_in_the_step_that_made_it(claude_run):
    document, _ = export(CLAUDE_RUN_ID)

    outputs = {item.call_id: item.output for item in claude_run.items.filter(type="tool_result")}
    for step in document["steps"]:
        calls = {c["tool_call_id"] for c in step.get("tool_calls", [])}
        for result in step.get("observation", {}).get("results", []):
            assert result["source_call_id"] in calls
            assert result["content"] == outputs[result["source_call_id"]]


def test_promoted_outputs_are_their_summaries_with_the_blob_named(claude_run):
    document, _ = export(CLAUDE_RUN_ID)

    promoted = [
        r
        for s in document["steps"]
        for r in s.get("observation", {}).get("results", [])
        if "blob_id" in r.get("extra", {})
    ]
    assert len(promoted) == 57
    for result in promoted:
        assert result["content"].startswith(f"[blob:{result['extra']['blob_id']}]")
        assert len(result["content"].encode()) <= 400
        assert result["extra"]["received_bytes"] > 800


def test_inline_blobs_puts_each_promoted_output_whole(claude_run):
    document, err = export(CLAUDE_RUN_ID, "--inline-blobs")

    assert err == ""
    assert atif_problems(document) == []
    store = blob_store()
    inlined = [
        r
        for s in document["steps"]
        for r in s.get("observation", {}).get("results", [])
        if r.get("extra", {}).get("inlined")
    ]
    assert len(inlined) == 57
    for result in inlined:
        blob_id = result["extra"]["blob_id"]
        with store.open_sync(blob_id) as blob:
            whole = blob.read(0, blob.size).decode("utf-8", "surrogatepass")
        assert result["content"] == whole
        assert len(result["content"].encode()) == result["extra"]["received_bytes"]


def test_a_blob_missing_from_the_store_keeps_its_summary_and_is_said(claude_run, data_dir):
    item = next(i for i in claude_run.items.filter(type="tool_result") if i.received_bytes > 800)
    blob_id = item.output[len("[blob:") : len("[blob:") + 36]
    (data_dir / "blobs" / f"{blob_id}.txt").unlink()

    document, err = export(CLAUDE_RUN_ID, "--inline-blobs")

    assert err.strip() == f"blob {blob_id} is not in the store; its summary is written instead"
    result = next(
        r
        for s in document["steps"]
        for r in s.get("observation", {}).get("results", [])
        if r.get("extra", {}).get("blob_id") == blob_id
    )
    assert result["content"] == item.output
    assert result["extra"]["not_inlined"] is True


def test_a_big_blob_is_streamed_whole_and_escaped(data_dir):
    store = blob_store()
    from core.content import Text

    text = 'line "quoted" \\ é\u2028 \x1b[1m\n' * 200_000 + "lone \ud800 surrogate"
    blob_id = store.store_sync(Text(text))
    summary = f"[blob:{blob_id}] text | 200,001 lines"
    session = make_session(
        [
            {"type": "assistant", "tool_calls": [call("c1", "cat", {"path": "big.log"})]},
            {
                "type": "tool_result",
                "call_id": "c1",
                "tool": "cat",
                "output": summary,
                "output_bytes": len(summary),
                "received_bytes": len(text.encode("utf-8", "surrogatepass")),
            },
        ]
    )
    document, _ = export(str(session.id), "--inline-blobs")

    assert document["steps"][0]["observation"]["results"][0]["content"] == text


def test_roles_compaction_errors_notes_and_odd_arguments(data_dir):
    session = make_session(
        [
            {"type": "user", "role": "system", "text": "You are terse."},
            {"type": "user", "text": "List files."},
            {
                "type": "assistant",
                "text": "Listing.",
                "tool_calls": [
                    call("c1", "shell", "ls -la | not json"),
                    call("c2", "shell", {"command": "false"}),
                    {"id": "c3", "name": "poll", "arguments": {}, "title": "npm test · poll 2"},
                ],
            },
            {"type": "tool_result", "call_id": "c1", "tool": "shell", "output": "a\nb"},
            {
                "type": "tool_result",
                "call_id": "c2",
                "tool": "shell",
                "output": "exit 1",
                "is_error": True,
                "note": "exit code 1",
            },
            {"type": "tool_result", "call_id": "gone", "tool": "shell", "output": "orphan"},
            {"type": "user", "role": "compacted", "text": "Summary: listed files."},
            {"type": "user", "role": "meta", "text": "a harness note", "sidechain": True},
        ],
        source_format="codex",
        meta={"agent": "codex-cli", "agent_version": "0.63.0"},
    )
    document, _ = export(str(session.id))
    assert atif_problems(document) == []
    steps = document["steps"]
    assert document["agent"] == {"name": "codex-cli", "version": "0.63.0"}
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent", "system", "user"]
    assert steps[0]["message"] == "You are terse."

    calls = steps[2]["tool_calls"]
    assert calls[0]["arguments"] == {}
    assert calls[0]["extra"] == {"raw_arguments": "ls -la | not json"}
    assert calls[1] == {
        "tool_call_id": "c2",
        "function_name": "shell",
        "arguments": {"command": "false"},
    }
    assert calls[2]["extra"] == {"title": "npm test · poll 2"}
    results = steps[2]["observation"]["results"]
    assert results == [
        {"source_call_id": "c1", "content": "a\nb"},
        {
            "source_call_id": "c2",
            "content": "exit 1",
            "extra": {"is_error": True, "note": "exit code 1"},
        },
    ]
    # The result whose call is not recorded: a step of its own, naming the call.
    assert steps[3]["observation"]["results"] == [
        {
            "content": "orphan",
            "extra": {"call_id": "gone", "tool": "shell", "call_not_recorded": True},
        }
    ]
    assert steps[3]["message"] == ""
    assert steps[4]["extra"] == {
        "context_management": {"type": "compaction", "boundary": "replace"}
    }
    assert steps[4]["observation"]["results"] == [{"content": "Summary: listed files."}]
    assert steps[5]["extra"] == {"role": "meta", "sidechain": True}


def test_metrics_leave_out_what_was_not_recorded_and_final_metrics_total_them(data_dir):
    session = make_session(
        [
            {"type": "user", "text": "hi"},
            {"type": "assistant", "text": "a", "input_tokens": 100, "output_tokens": 7},
            {
                "type": "assistant",
                "text": "b",
                "input_tokens": 150,
                "output_tokens": 3,
                "cache_read_tokens": 90,
                "cost_usd": 0.25,
            },
            {"type": "assistant", "text": "c"},
        ]
    )
    document, _ = export(str(session.id))

    assert "metrics" not in document["steps"][0]
    assert document["steps"][1]["metrics"] == {"prompt_tokens": 100, "completion_tokens": 7}
    assert document["steps"][2]["metrics"] == {
        "prompt_tokens": 150,
        "completion_tokens": 3,
        "cached_tokens": 90,
        "cost_usd": 0.25,
    }
    assert "metrics" not in document["steps"][3]
    assert document["final_metrics"] == {
        "total_prompt_tokens": 250,
        "total_completion_tokens": 10,
        "total_cached_tokens": 90,
        "total_cost_usd": 0.25,
        "total_steps": 4,
    }


def test_a_session_without_items_is_one_system_step(data_dir):
    session = make_session([], cost_usd=1.5)
    document, _ = export(str(session.id))

    assert atif_problems(document) == []
    assert document["steps"] == [
        {"step_id": 1, "source": "system", "message": "", "extra": {"no_items": True}}
    ]
    assert document["final_metrics"] == {"total_cost_usd": 1.5, "total_steps": 1}


def test_output_goes_to_the_file_named(claude_run, tmp_path):
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "run.atif.json"
    out = StringIO()
    call_command("sessions", "export", CLAUDE_RUN_ID, "--output", str(target), stdout=out)

    assert out.getvalue() == ""
    assert atif_problems(json.loads(target.read_text(encoding="utf-8"))) == []
    assert [p.name for p in target.parent.iterdir()] == ["run.atif.json"]  # no temporary left
