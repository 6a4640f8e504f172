"""What importers record of a turn's tokens and a run's end, where the recording has them."""

from __future__ import annotations

import json
from pathlib import Path

from blobviewer.ingest.importers import load_recording
from importers.recordings import (
    CLAUDE_CODE,
    MINI_SWE_AGENT,
    SWE_AGENT_CLASSIC,
    claude_line,
    write_json,
    write_jsonl,
)

TOKENS = ("input_tokens", "output_tokens", "context_tokens")


def _assistant_part(message_id: str, block: dict, usage: dict | None, **extra: object) -> dict:
    message = {"id": message_id, "role": "assistant", "content": [block]}
    if usage is not None:
        message["usage"] = usage
    return claude_line("assistant", [block], message=message, **extra)


def test_claude_code_counts_a_messages_usage_once_however_many_lines_it_spans(
    tmp_path: Path,
) -> None:
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 20000,
        "output_tokens": 5,
    }
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            _assistant_part("msg_a", {"type": "text", "text": "looking"}, usage),
            _assistant_part(
                "msg_a",
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
                {**usage, "output_tokens": 250},
            ),
            claude_line("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
            _assistant_part("msg_b", {"type": "text", "text": "done"}, None),
        ],
    )

    records = load_recording(path).records

    turns = [r for r in records if r["type"] == "assistant"]
    # The whole context the turn read: new input plus both kinds of cached input.
    assert {k: turns[0][k] for k in TOKENS} == {
        "input_tokens": 21003,
        "output_tokens": 250,
        "context_tokens": 21003,
    }
    assert not any(k in turns[1] for k in TOKENS)  # the same message's second line
    assert not any(k in turns[2] for k in TOKENS)  # a message that recorded no usage


def test_claude_code_fixture_tokens_sum_to_each_messages_own(fixtures_dir: Path) -> None:
    final: dict[str, int] = {}
    for line in CLAUDE_CODE.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "assistant" and "usage" in entry["message"]:
            message = entry["message"]
            final[message["id"]] = max(
                final.get(message["id"], 0), message["usage"]["output_tokens"]
            )

    records = load_recording(CLAUDE_CODE).records

    with_tokens = [r for r in records if "output_tokens" in r]
    assert len(with_tokens) == len(final)
    assert sum(r["output_tokens"] for r in with_tokens) == sum(final.values())


def test_mini_swe_agent_takes_each_turns_usage_from_its_response(fixtures_dir: Path) -> None:
    messages = json.loads(MINI_SWE_AGENT.read_text())["messages"]
    usages = [m["extra"]["response"]["usage"] for m in messages if m["role"] == "assistant"]

    records = load_recording(MINI_SWE_AGENT).records

    turns = [r for r in records if r["type"] == "assistant"]
    assert [(r["input_tokens"], r["output_tokens"]) for r in turns] == [
        (u["prompt_tokens"], u["completion_tokens"]) for u in usages
    ]
    assert all(r["context_tokens"] == r["input_tokens"] for r in turns)


def test_a_chat_without_usage_records_no_tokens_and_ignores_nonsense_counts(
    tmp_path: Path,
) -> None:
    path = write_json(
        tmp_path / "chat.json",
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {
                "role": "assistant",
                "content": "again",
                "usage": {"prompt_tokens": -4, "completion_tokens": True},
            },
        ],
    )

    records = load_recording(path).records

    assert not any(k in r for r in records for k in TOKENS)


def test_a_swe_agent_trajectory_keeps_its_run_totals_and_exit_status(fixtures_dir: Path) -> None:
    info = json.loads(SWE_AGENT_CLASSIC.read_text())["info"]

    recording = load_recording(SWE_AGENT_CLASSIC)

    assert recording.header["status"] == info["exit_status"]
    assert recording.header["meta"]["model_stats"] == info["model_stats"]
    # It records no per-turn split, so no turn claims any.
    assert not any(k in r for r in recording.records for k in TOKENS)


def test_a_recording_without_times_has_no_created_at_not_its_files_mtime(
    fixtures_dir: Path,
) -> None:
    recording = load_recording(SWE_AGENT_CLASSIC)
    assert not any(r["at"] for r in recording.records)
    assert recording.header["created_at"] is None
