"""Session logs (docs/session-log.md): one JSON Lines file per session, tolerant of a torn last
line."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from core.agent.history import AssistantMessage, Item, ToolCall, ToolResult, UserMessage
from core.agent.session_log import SessionLogError, SessionLogWriter, read_session_log
from core.store.blob_id import parse_blob_id

ITEMS: list[Item] = [
    UserMessage("What is in big.log?"),
    AssistantMessage("Reading it.", (ToolCall("call_1", "read_file", {"path": "big.log"}),)),
    ToolResult("call_1", "read_file", "[blob:0190f5e2-0000-7000-8000-000000000000] text | 9 lines"),
    ToolResult("call_2", "grep", "bad regex '(': missing )", is_error=True),
    AssistantMessage("It is a log."),
]


def write_log(directory: Path, items: list[Item] = ITEMS, **header: object) -> Path:
    with SessionLogWriter(directory, **header) as log:  # type: ignore[arg-type]
        for item in items:
            log.append(item)
    return log.path


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_the_file_is_named_after_a_uuid7_session_id(tmp_path: Path) -> None:
    with SessionLogWriter(tmp_path) as log:
        pass
    assert log.path == tmp_path / f"{log.session_id}.jsonl"
    assert parse_blob_id(log.session_id).version == 7


def test_line_one_is_the_session_header(tmp_path: Path) -> None:
    path = write_log(tmp_path, [], title="Tour", model="gpt-4o-mini", meta={"demo": True})
    header = json.loads(lines_of(path)[0])
    assert list(header) == ["type", "id", "created_at", "title", "model", "meta"]
    assert header["type"] == "session"
    assert (header["title"], header["model"], header["meta"]) == (
        "Tour",
        "gpt-4o-mini",
        {"demo": True},
    )
    assert datetime.fromisoformat(header["created_at"]).tzinfo is not None


def test_each_item_is_one_line_with_type_seq_time_and_its_fields(tmp_path: Path) -> None:
    path = write_log(tmp_path)
    records = [json.loads(line) for line in lines_of(path)[1:]]
    assert [r["type"] for r in records] == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
    ]
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5]
    assert all(datetime.fromisoformat(r["at"]).tzinfo is not None for r in records)
    assert records[1]["tool_calls"] == [
        {"id": "call_1", "name": "read_file", "arguments": {"path": "big.log"}}
    ]
    assert {k: records[3][k] for k in ("call_id", "tool", "output", "is_error")} == {
        "call_id": "call_2",
        "tool": "grep",
        "output": "bad regex '(': missing )",
        "is_error": True,
    }


def test_a_log_reads_back_to_the_same_items_and_header(tmp_path: Path) -> None:
    path = write_log(tmp_path, title="Tour", model="m")
    log = read_session_log(path)
    assert log.items() == ITEMS
    assert log.header["title"] == "Tour"
    assert log.id == path.stem
    assert not log.torn_tail


def test_each_item_is_on_disk_as_soon_as_it_is_appended(tmp_path: Path) -> None:
    with SessionLogWriter(tmp_path) as log:
        log.append(UserMessage("first"))
        assert read_session_log(log.path).items() == [UserMessage("first")]


def test_text_that_utf8_cannot_hold_reads_back_unchanged(tmp_path: Path) -> None:
    items: list[Item] = [ToolResult("c", "list_dir", "caf\udce9.txt\nnaïve — ✓")]
    assert read_session_log(write_log(tmp_path, items)).items() == items


def test_a_line_cut_mid_write_at_the_end_is_skipped(tmp_path: Path) -> None:
    path = write_log(tmp_path)
    with path.open("ab") as file:
        file.write(b'{"type":"user","seq":6,"at":"2025-01-01T00:00:00+00:00","te')
    log = read_session_log(path)
    assert log.torn_tail
    assert log.items() == ITEMS


def test_damage_in_the_middle_is_reported_with_its_line_number(tmp_path: Path) -> None:
    path = write_log(tmp_path)
    lines = lines_of(path)
    lines[3] = b'{"type":"assistant","seq":3,"te\n'
    path.write_bytes(b"".join(lines))
    with pytest.raises(SessionLogError) as caught:
        read_session_log(path)
    assert caught.value.line == 4
    assert str(caught.value).startswith(f"{path}:4: not JSON")


def test_a_complete_last_line_that_is_not_json_is_damage_not_a_torn_tail(tmp_path: Path) -> None:
    path = write_log(tmp_path)
    with path.open("ab") as file:
        file.write(b"}{\n")
    with pytest.raises(SessionLogError) as caught:
        read_session_log(path)
    assert caught.value.line == len(ITEMS) + 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"type":"note","seq":6}', "type must be one of user, assistant, tool_result"),
        (b'{"type":"user","seq":0,"text":"x"}', "seq must be an integer from 1 to"),
        (b'{"type":"user","seq":6}', "missing field 'text'"),
        (b"[1,2]", "each line must be a JSON object"),
        (b"", "empty line"),
    ],
)
def test_a_line_that_is_json_but_not_an_item_is_named(
    tmp_path: Path, line: bytes, message: str
) -> None:
    path = write_log(tmp_path)
    with path.open("ab") as file:
        file.write(line + b"\n")
    with pytest.raises(SessionLogError, match=f":{len(ITEMS) + 2}: {message}"):
        read_session_log(path)


def test_a_file_without_a_session_header_is_refused_at_line_one(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type":"user","seq":1,"text":"hi"}\n')
    with pytest.raises(SessionLogError) as caught:
        read_session_log(path)
    assert caught.value.line == 1
    assert "the first line must be" in caught.value.message


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"")
    with pytest.raises(SessionLogError) as caught:
        read_session_log(path)
    assert caught.value.line == 1


def test_a_missing_file_is_an_error_without_a_line(tmp_path: Path) -> None:
    with pytest.raises(SessionLogError) as caught:
        read_session_log(tmp_path / "missing.jsonl")
    assert caught.value.line == 0
    assert "cannot read" in str(caught.value)


def test_a_writer_never_appends_a_second_header_to_an_existing_log(tmp_path: Path) -> None:
    first = SessionLogWriter(tmp_path, title="one")
    first.close()
    with pytest.raises(ValueError, match="already exists"):
        SessionLogWriter(tmp_path, session_id=first.session_id)
    assert read_session_log(first.path).header["title"] == "one"
