"""What importers record for a turn's cost (docs/cost.md): the cache's reads and writes
apart from the context read, and the recording's own cost where it gives one."""

from __future__ import annotations

import json
from pathlib import Path

from blobviewer.ingest.importers import load_recording
from importers.recordings import (
    CLAUDE_CODE,
    FIXTURES,
    MINI_SWE_AGENT,
    claude_line,
    write_jsonl,
)

CODEX = next((FIXTURES / "codex").glob("rollout-*.jsonl"))
GEMINI = FIXTURES / "gemini" / "gemini_with_tool_error.jsonl"
OPENHANDS_V0 = FIXTURES / "openhands" / "basic_gui_mode.json"
OPENHANDS_V1 = FIXTURES / "openhands" / "v1-conversation-cd94562403b9487ebdd4018e3f531dfd"


def with_tokens(path: Path) -> list[dict]:
    return [r for r in load_recording(path).records if "input_tokens" in r]


def test_claude_code_puts_each_messages_cache_reads_and_writes_on_its_first_item() -> None:
    usages = {}
    for line in CLAUDE_CODE.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "assistant" and "usage" in entry["message"]:
            usages.setdefault(entry["message"]["id"], entry["message"]["usage"])

    turns = with_tokens(CLAUDE_CODE)

    assert [(r["cache_read_tokens"], r["cache_write_tokens"]) for r in turns] == [
        (u["cache_read_input_tokens"], u["cache_creation_input_tokens"]) for u in usages.values()
    ]
    # The context read still counts both: the meaning of input_tokens is unchanged.
    assert all(r["input_tokens"] >= r["cache_read_tokens"] + r["cache_write_tokens"] for r in turns)
    assert not any("cost_usd" in r for r in turns)  # this version records no costUSD


def test_claude_codes_cost_usd_is_the_messages_own_once(tmp_path: Path) -> None:
    message = {"id": "msg_1", "role": "assistant", "model": "claude-3-5-sonnet-20241022"}
    usage = {"input_tokens": 10, "output_tokens": 5}
    lines = []
    for n, block in enumerate([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]):
        line = claude_line("assistant", [block], uuid=f"a{n}", costUSD=0.0123)
        line["message"] = {**message, "content": [block], "usage": usage}
        lines.append(line)
    path = write_jsonl(tmp_path / "s.jsonl", lines)

    turns = [r for r in load_recording(path).records if r["type"] == "assistant"]

    assert turns[0]["cost_usd"] == 0.0123
    assert "cost_usd" not in turns[1]  # the same message's second line


def test_codex_records_the_cached_input_of_each_response() -> None:
    cached = []
    for line in CODEX.read_text().splitlines():
        entry = json.loads(line)
        payload = entry.get("payload") or {}
        info = payload.get("info") or {}
        if payload.get("type") == "token_count" and info.get("last_token_usage"):
            cached.append(info["last_token_usage"]["cached_input_tokens"])

    turns = with_tokens(CODEX)

    assert turns and all("cache_read_tokens" in r for r in turns)
    assert {r["cache_read_tokens"] for r in turns} <= set(cached)
    assert sum(r["cache_read_tokens"] for r in turns) > 0


def test_mini_swe_agent_records_cached_prompt_tokens_and_its_instance_cost() -> None:
    document = json.loads(MINI_SWE_AGENT.read_text())
    usages = [
        m["extra"]["response"]["usage"] for m in document["messages"] if m["role"] == "assistant"
    ]

    recording = load_recording(MINI_SWE_AGENT)

    turns = [r for r in recording.records if r["type"] == "assistant"]
    assert [r["cache_read_tokens"] for r in turns] == [
        u["prompt_tokens_details"]["cached_tokens"] for u in usages
    ]
    assert recording.header["cost_usd"] == document["info"]["model_stats"]["instance_cost"]


def test_gemini_records_its_cached_input() -> None:
    lines = [json.loads(line) for line in GEMINI.read_text().splitlines()]
    cached = [line["tokens"]["cached"] for line in lines if "tokens" in line]

    turns = with_tokens(GEMINI)

    assert [r["cache_read_tokens"] for r in turns] == cached
    assert sum(cached) > 0


def test_openhands_records_cache_reads_and_writes_in_both_forms() -> None:
    v0 = with_tokens(OPENHANDS_V0)
    assert v0 and all("cache_write_tokens" in r for r in v0)
    assert sum(r["cache_write_tokens"] for r in v0) > 0  # Anthropic's, through LiteLLM

    v1 = with_tokens(OPENHANDS_V1)
    assert [r["cache_read_tokens"] for r in v1][:1] == [0]
    assert sum(r["cache_read_tokens"] for r in v1) == 7552  # base_state.json's total
