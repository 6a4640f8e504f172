from __future__ import annotations

import json
from pathlib import Path

import pytest

from blobviewer.ingest.importers import RecordingError, load_recording
from blobviewer.ingest.importers.recording import text_of
from importers.recordings import CLAUDE_CODE, CLAUDE_SESSION, claude_line, write_jsonl


def _tool_result_blocks(path: Path) -> list[dict]:
    blocks = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        content = (entry.get("message") or {}).get("content")
        if entry.get("type") == "user" and isinstance(content, list):
            blocks += [b for b in content if b.get("type") == "tool_result"]
    return blocks


def test_the_fixture_keeps_every_tool_result_in_order_and_exactly(fixtures_dir: Path) -> None:
    recording = load_recording(CLAUDE_CODE)
    results = [r for r in recording.records if r["type"] == "tool_result"]
    blocks = _tool_result_blocks(CLAUDE_CODE)
    assert len(results) == len(blocks) == 108
    for record, block in zip(results, blocks, strict=True):
        assert record["call_id"] == block["tool_use_id"]
        assert record["output"] == text_of(block["content"])
    assert recording.header["id"] == CLAUDE_SESSION
    assert [r["seq"] for r in recording.records] == list(range(1, len(recording.records) + 1))


def test_tool_use_result_copies_do_not_become_items(fixtures_dir: Path) -> None:
    recording = load_recording(CLAUDE_CODE)
    copies = sum(1 for line in CLAUDE_CODE.read_text().splitlines() if '"toolUseResult"' in line)
    assert copies > 0
    outputs = [r["output"] for r in recording.records if r["type"] == "tool_result"]
    assert len(outputs) == len(_tool_result_blocks(CLAUDE_CODE))


def test_results_name_the_tool_that_was_called(fixtures_dir: Path) -> None:
    recording = load_recording(CLAUDE_CODE)
    calls = {
        call["id"]: call["name"]
        for r in recording.records
        if r["type"] == "assistant"
        for call in r["tool_calls"]
    }
    for record in recording.records:
        if record["type"] == "tool_result":
            assert record["tool"] == calls[record["call_id"]]


def test_sidechains_list_content_and_errors(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"type": "summary", "summary": "A title", "leafUuid": "x"},
            claude_line("user", "please look"),
            claude_line(
                "assistant",
                [{"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "go"}}],
            ),
            claude_line(
                "assistant",
                [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}}],
                isSidechain=True,
            ),
            claude_line(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                        "is_error": True,
                    }
                ],
                isSidechain=True,
                toolUseResult={"stdout": "a\nb", "stderr": ""},
            ),
            claude_line("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]),
        ],
    )
    recording = load_recording(path)
    assert recording.header["title"] == "A title"
    types = [(r["type"], r.get("sidechain", False)) for r in recording.records]
    assert types == [
        ("user", False),
        ("assistant", False),
        ("assistant", True),
        ("tool_result", True),
        ("tool_result", False),
    ]
    sidechain_result = recording.records[3]
    assert sidechain_result["output"] == "a\nb"
    assert sidechain_result["is_error"] is True
    assert sidechain_result["tool"] == "Bash"
    assert recording.records[2]["tool_calls"][0]["arguments"] == {"command": "ls"}


def test_a_damaged_line_is_reported_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = json.dumps(claude_line("user", "hi"))
    path.write_text(f"{good}\n{{not json\n{good}\n")
    with pytest.raises(RecordingError) as error:
        load_recording(path)
    assert error.value.line == 2
    assert f"{path}:2:" in str(error.value)


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = json.dumps(claude_line("user", "hi"))
    path.write_text(f"{good}\n{good[:20]}")
    assert len(load_recording(path).records) == 1
