from __future__ import annotations

import json
from pathlib import Path

from blobviewer.ingest.importers import load_recording
from importers.recordings import MINI_SWE_AGENT, write_json


def test_the_mini_swe_agent_fixture_keeps_every_message_in_order(fixtures_dir: Path) -> None:
    document = json.loads(MINI_SWE_AGENT.read_text())
    recording = load_recording(MINI_SWE_AGENT)
    assert recording.format == "openai_chat"
    assert len(recording.records) == len(document["messages"]) == 148
    for record, message in zip(recording.records, document["messages"], strict=True):
        if message["role"] == "tool":
            assert record["type"] == "tool_result"
            assert record["call_id"] == message["tool_call_id"]
            assert record["output"] == message["content"]
            assert record["tool"] == "bash"
        elif message["role"] == "assistant":
            assert record["type"] == "assistant"
            assert [c["id"] for c in record["tool_calls"]] == [
                c["id"] for c in message["tool_calls"]
            ]
        else:
            assert record["type"] == "user"
            assert record["text"] == message["content"]
    assert recording.header["title"] == "django__django-12708"


def test_a_plain_list_of_messages_with_two_calls_and_parts(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "chat.json",
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "read both"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "x"}'},
                    },
                    {
                        "id": "b",
                        "type": "function",
                        "function": {"name": "grep", "arguments": "not json"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "b", "content": "grep out"},
            {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "x!"}]},
            {"role": "assistant", "content": "done"},
        ],
    )
    records = load_recording(path).records
    # Every record also carries the digest of the message it came from, which ingest keys
    # the item by (tested in tests/importers/test_source_digests.py); the rest is the item.
    assert len(records[0].pop("source_digest")) == 64
    assert records[0] == {
        "type": "user",
        "seq": 1,
        "at": None,
        "text": "be brief",
        "role": "system",
    }
    assert records[1]["text"] == "read both"
    assert records[2]["tool_calls"] == [
        {"id": "a", "name": "read", "arguments": {"path": "x"}},
        {"id": "b", "name": "grep", "arguments": "not json"},
    ]
    assert (records[3]["tool"], records[3]["output"]) == ("grep", "grep out")
    assert (records[4]["tool"], records[4]["output"]) == ("read", "x!")
    assert records[5]["text"] == "done"


def test_the_same_content_gets_the_same_session_id_from_any_path(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "hi"}]
    first = load_recording(write_json(tmp_path / "a.json", messages))
    second = load_recording(write_json(tmp_path / "b.json", messages))
    other = load_recording(write_json(tmp_path / "c.json", [{"role": "user", "content": "yo"}]))
    assert first.header["id"] == second.header["id"] != other.header["id"]
