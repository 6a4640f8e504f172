"""A Claude Code log or Codex rollout that grows is read from where its last ingest ended,
and what the parts add up to is what one ingest of the whole file makes
(docs/recording.md#grown-recordings-are-read-from-where-they-ended)."""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from blobviewer.ingest.importers.json_lines import HEADER_BLOCK
from blobviewer.ingest.recording_files import ReadState
from blobviewer.models import IngestedFile, Item, Session
from importers.recordings import CLAUDE_CODE, FIXTURES, claude_line
from importers.test_codex import call, meta, output, user, write
from web.records import STORED_ITEM_FIELDS

pytestmark = pytest.mark.django_db

GROWING = [
    CLAUDE_CODE,
    FIXTURES / "claude_code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    *sorted((FIXTURES / "codex").glob("*.jsonl")),
]
SESSION_FIELDS = [
    "id",
    "title",
    "model",
    "meta",
    "created_at",
    "status",
    "importer_version",
    "item_count",
    "tool_result_count",
    "blob_count",
    "output_bytes_received",
    "output_bytes_in_history",
    "started_at",
    "ended_at",
    "duration",
    "step_count",
    "error_count",
]
BLOB_ID = re.compile(r"\[blob:[0-9a-f-]{36}\]")


@pytest.fixture
def read_whole_after_all(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The formats of the resumed reads that gave way to a read of the whole file."""
    formats: list[str] = []
    real = ReadState.whole

    def whole(state: ReadState) -> None:
        formats.append(state.format)
        real(state)

    monkeypatch.setattr(ReadState, "whole", whole)
    return formats


def ingest(path: Path) -> str:
    out, err = StringIO(), StringIO()
    try:
        call_command("ingest", str(path), stdout=out, stderr=err)
    except CommandError as error:
        raise AssertionError(err.getvalue()) from error
    return out.getvalue()


def recorded() -> list[dict[str, Any]]:
    """Every session and its items as stored (a promoted output's blob id aside: each
    ingest stores its own blob)."""
    sessions = []
    for session in Session.objects.order_by("id").values(*SESSION_FIELDS):
        items = (
            Item.objects.filter(session_id=session["id"])
            .order_by("seq")
            .values(*STORED_ITEM_FIELDS)
        )
        session["items"] = [
            {**item, "output": BLOB_ID.sub("[blob]", item["output"])} for item in items
        ]
        sessions.append(session)
    return sessions


def whole_ingest(source: Path, folder: Path) -> list[dict[str, Any]]:
    """What one ingest of all of *source* records; the database is left empty again."""
    (folder / "whole").mkdir()
    path = folder / "whole" / source.name
    path.write_bytes(source.read_bytes())
    ingest(path)
    made = recorded()
    Session.objects.all().delete()
    IngestedFile.objects.all().delete()
    return made


def cuts(lines: list[bytes]) -> list[int]:
    """Where a recording is cut: a quarter, half and three quarters in."""
    count = len(lines)
    return sorted({count // 4, count // 2, 3 * count // 4} - {0})


@pytest.mark.parametrize("source", GROWING, ids=lambda path: path.name[:24])
def test_a_recording_ingested_as_it_grows_ends_as_one_ingest_of_it(
    source, tmp_path, data_dir, bytes_read, read_whole_after_all
):
    whole = whole_ingest(source, tmp_path)
    lines = source.read_bytes().splitlines(keepends=True)
    path = tmp_path / source.name
    path.write_bytes(b"".join(lines[: cuts(lines)[0]]))
    ingest(path)
    for start, end in zip(cuts(lines), [*cuts(lines)[1:], len(lines)], strict=True):
        before = path.stat().st_size
        grown = b"".join(lines[start:end])
        with path.open("ab") as file:  # the agent goes on, and is half-way through a line
            file.write(grown[: len(grown) - len(lines[end - 1]) // 2])
        bytes_read.clear()
        ingest(path)
        with path.open("ab") as file:
            file.write(grown[len(grown) - len(lines[end - 1]) // 2 :])
        ingest(path)

        # The file's first line again (to recognise it), and the new bytes.
        assert sum(bytes_read) <= 4 * HEADER_BLOCK + path.stat().st_size - before
        row = IngestedFile.objects.get()
        assert row.offset == path.stat().st_size and row.carry is not None

    assert recorded() == whole
    assert read_whole_after_all == []


def test_a_big_recording_that_grew_reads_only_what_it_added(tmp_path, data_dir, bytes_read):
    source = FIXTURES / "claude_code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    path = tmp_path / source.name
    path.write_bytes(b"".join(lines[:-20]))
    ingest(path)
    first = sum(bytes_read)
    bytes_read.clear()
    path.write_bytes(b"".join(lines))

    ingest(path)

    assert first >= path.stat().st_size - len(b"".join(lines[-20:]))
    assert sum(bytes_read) < 4 * HEADER_BLOCK + len(b"".join(lines[-20:])) < first / 5


def test_a_line_repeated_after_the_resume_point_makes_the_file_read_whole(
    tmp_path, data_dir, bytes_read, read_whole_after_all
):
    """A duplicated line has the key of its first copy's item and a count (`#1`) that only
    a read of the whole file knows: the resumed read gives way to one."""
    question = claude_line("user", "What is in this folder?", uuid="u1")
    answer = claude_line("assistant", [{"type": "text", "text": "Three files."}], uuid="a1")
    path = tmp_path / "session.jsonl"
    path.write_text(json.dumps(question) + "\n" + json.dumps(answer) + "\n")
    ingest(path)
    with path.open("a") as file:
        file.write(json.dumps(answer) + "\n")
    bytes_read.clear()

    ingest(path)

    assert sum(bytes_read) >= path.stat().st_size  # read whole after all
    assert read_whole_after_all == ["claude_code"]
    texts = list(Item.objects.order_by("seq").values_list("text", flat=True))
    assert texts == ["What is in this folder?", "Three files.", "Three files."]
    assert len(set(Item.objects.values_list("digest", flat=True))) == 3


def test_usage_and_a_late_exit_reach_items_recorded_by_the_last_ingest(tmp_path, data_dir):
    """Claude Code writes an API message over several lines, the usage growing; Codex may
    report a command's exit after its output: a resumed read updates the item already
    recorded, as a whole read does."""
    message = {"id": "msg_1", "role": "assistant", "model": "claude-x"}
    first = claude_line("assistant", [{"type": "text", "text": "Let me look."}], uuid="a1")
    first["message"] = {**message, **first["message"], "usage": {"input_tokens": 10}}
    second = claude_line(
        "assistant",
        [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
        uuid="a2",
    )
    second["message"] = {
        **message,
        **second["message"],
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 40},
        "stop_reason": "tool_use",
    }
    path = tmp_path / "session.jsonl"
    path.write_text(json.dumps(first) + "\n")
    ingest(path)
    with path.open("a") as file:
        file.write(json.dumps(second) + "\n")

    ingest(path)

    item = Item.objects.get(seq=1)
    assert (item.input_tokens, item.context_tokens, item.output_tokens) == (15, 15, 40)
    assert Item.objects.get(seq=2).tool_calls[0]["name"] == "Bash"
    assert Session.objects.get().status == "tool_use"
    assert IngestedFile.objects.get().offset == path.stat().st_size


def test_a_codex_exit_reported_after_the_resume_point_marks_the_step_failed(tmp_path, data_dir):
    def line(kind: str, payload: dict[str, Any]) -> str:
        entry = {"timestamp": "2026-05-11T11:26:55.000Z", "type": kind, "payload": payload}
        return json.dumps(entry) + "\n"

    call = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "no such file"}
    end = {"type": "exec_command_end", "call_id": "c1", "exit_code": 2}
    path = tmp_path / "rollout.jsonl"
    meta = {"id": "019e1625-789d-76c0-80ab-3724b5ddb799", "timestamp": "2026-05-11T11:26:55Z"}
    path.write_text(
        line("session_meta", meta) + line("response_item", call) + line("response_item", output)
    )
    ingest(path)
    assert not Item.objects.get(seq=2).is_error
    with path.open("a") as file:
        file.write(line("event_msg", end))

    ingest(path)

    assert Item.objects.get(seq=2).is_error
    assert Session.objects.get().error_count == 1
    assert IngestedFile.objects.get().carry["undecided"] == {}


def test_a_codex_rollout_whose_first_message_is_empty_keeps_its_title(tmp_path, data_dir):
    """The first user message is carried even when it is empty: a later one does not
    become the title of a read that resumed (a whole read names it by its file)."""
    source = write(
        tmp_path / "rollout-2026-01-02T10-00-00-0199a8e0-0000-7000-8000-000000000001.jsonl",
        [
            meta(),
            user(""),
            call("c1", "ls"),
            output("c1", "a.py"),
            user("later"),
            call("c2", "pwd"),
        ],
    )
    whole = whole_ingest(source, tmp_path)
    lines = source.read_bytes().splitlines(keepends=True)
    path = tmp_path / source.name
    path.write_bytes(b"".join(lines[:4]))
    ingest(path)
    path.write_bytes(b"".join(lines))
    ingest(path)
    assert IngestedFile.objects.get().carry is not None
    assert recorded() == whole
    assert whole[0]["title"] == path.stem
