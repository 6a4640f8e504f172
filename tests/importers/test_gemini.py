"""Gemini CLI sessions: the real session and the small cases in tests/fixtures/real/gemini
(a whole JSON document and the JSON Lines variant), and hand-written edge cases (messages
appended again as they change, metadata updates, rewinds, torn and damaged lines, a
session rewritten whole as it grows).

Counts are computed from the raw file here, beside what the fixtures' README states."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from blobviewer.data_dir import blob_store
from blobviewer.ingest.importers import RecordingError, detect, load_recording
from blobviewer.ingest.sessions import ingest_file
from blobviewer.models import Item, Session
from core.content import utf8_size
from importers.read_back import assert_big_outputs_read_back
from importers.recordings import FIXTURES

GEMINI = FIXTURES / "gemini"
SESSION = GEMINI / "session-2025-12-01T21-45-5b959dae.json"
GOLDEN = GEMINI / "gemini_golden.json"
TOOL_ERROR = GEMINI / "gemini_with_tool_error.jsonl"
SESSION_ID = "5b959dae-8655-4cd1-b10f-720b8c336ea2"


# --- the raw file, read independently of the importer ---------------------------------


def raw_session(path: Path = SESSION) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def raw_calls(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        call
        for message in document["messages"]
        if message["type"] == "gemini"
        for call in message.get("toolCalls") or []
    ]


def raw_output(call: dict[str, Any]) -> str:
    response = call["result"][0]["functionResponse"]["response"]
    return response.get("output", response.get("error"))


def results(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "tool_result"]


def calls(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for r in records if r["type"] == "assistant" for c in r["tool_calls"]]


# --- writing sessions by hand -----------------------------------------------------------

METADATA = {
    "sessionId": "7d9e1b2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
    "projectHash": "f" * 64,
    "startTime": "2026-02-01T10:00:00.000Z",
    "lastUpdated": "2026-02-01T10:00:00.000Z",
}


def user(message_id: str, text: str, at: str = "2026-02-01T10:00:01.000Z") -> dict[str, Any]:
    return {"id": message_id, "timestamp": at, "type": "user", "content": text}


def gemini(message_id: str, text: str, *tool_calls: dict[str, Any], **extra: Any) -> dict:
    message = {
        "id": message_id,
        "timestamp": "2026-02-01T10:00:02.000Z",
        "type": "gemini",
        "content": text,
        "model": "gemini-2.5-pro",
        **extra,
    }
    if tool_calls:
        message["toolCalls"] = list(tool_calls)
    return message


def tool_call(call_id: str, output: str | None, status: str = "success", **extra: Any) -> dict:
    call = {
        "id": call_id,
        "name": "run_shell_command",
        "args": {"command": f"echo {call_id}"},
        "status": status,
        "timestamp": "2026-02-01T10:00:05.000Z",
        "resultDisplay": "shown in the terminal",
        **extra,
    }
    if output is not None:
        response = {"output": output} if status != "error" else {"error": output}
        call["result"] = [
            {"functionResponse": {"id": call_id, "name": "run_shell_command", "response": response}}
        ]
    return call


TOKENS = {"input": 1200, "output": 30, "cached": 1000, "thoughts": 12, "tool": 0, "total": 1242}


def write_jsonl(path: Path, entries: list[Any], *, tail: str = "") -> Path:
    text = "".join(json.dumps(e) + "\n" for e in entries) + tail
    path.write_text(text, encoding="utf-8")
    return path


def write_json(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


# --- the real session -------------------------------------------------------------------


def test_the_session_keeps_every_call_and_output_in_order_and_exactly(fixtures_dir) -> None:
    recording = load_recording(SESSION)
    expected = raw_calls(raw_session())
    outputs = [raw_output(call) for call in expected]

    assert recording.format == "gemini"
    assert len(expected) == 10  # the fixtures' README
    assert sum(utf8_size(output) > 800 for output in outputs) == 7
    assert [c["id"] for c in calls(recording.records)] == [c["id"] for c in expected]
    assert [c["arguments"] for c in calls(recording.records)] == [c["args"] for c in expected]
    assert [r["call_id"] for r in results(recording.records)] == [c["id"] for c in expected]
    assert [r["output"] for r in results(recording.records)] == outputs
    assert [r["seq"] for r in recording.records] == list(range(1, len(recording.records) + 1))


def test_every_result_answers_a_call_of_an_earlier_assistant_item(fixtures_dir) -> None:
    made: dict[str, str] = {}
    for record in load_recording(SESSION).records:
        if record["type"] == "assistant":
            made.update({c["id"]: c["name"] for c in record["tool_calls"]})
        elif record["type"] == "tool_result":
            assert made[record["call_id"]] == record["tool"]


def test_the_ui_text_of_a_result_is_never_stored(fixtures_dir) -> None:
    records = load_recording(SESSION).records
    shown = [
        c["resultDisplay"]
        for c in raw_calls(raw_session())
        if isinstance(c.get("resultDisplay"), str) and c["resultDisplay"]
    ]
    assert shown == ["Listed 5 item(s)."]
    stored = json.dumps(records)
    assert all(json.dumps(text)[1:-1] not in stored for text in shown)


def test_each_message_keeps_its_time_tokens_and_thoughts(fixtures_dir) -> None:
    recording = load_recording(SESSION)
    messages = raw_session()["messages"]
    # Every message yields an item of its own (a call's item has a call and no text).
    firsts = [
        r for r in recording.records if r["type"] != "tool_result" and not r.get("tool_calls")
    ]
    assert len(firsts) == len(messages) == 14
    assert all(r["type"] == "user" or r["text"] for r in firsts)  # every turn says something
    for record, message in zip(firsts, messages, strict=True):
        assert record["at"][:23] == message["timestamp"][:23]
        tokens = message.get("tokens")
        if tokens:
            assert record["context_tokens"] == record["input_tokens"] == tokens["input"]
            assert record["output_tokens"] == tokens["output"] + tokens["thoughts"]
        else:
            assert "context_tokens" not in record
        for thought in message.get("thoughts") or []:
            assert f"(thinking) {thought['subject']}: " in record["text"]
        assert message["content"] in record["text"]
    with_tokens = [r for r in recording.records if "context_tokens" in r]
    assert len(with_tokens) == sum(1 for m in messages if m.get("tokens")) == 11


def test_a_result_has_its_calls_time_and_the_call_none_of_its_own(fixtures_dir) -> None:
    records = load_recording(SESSION).records
    expected = raw_calls(raw_session())
    assert [r["at"][:23] for r in results(records)] == [c["timestamp"][:23] for c in expected]
    call_items = [r for r in records if r["type"] == "assistant" and r["tool_calls"]]
    assert all(r["at"] is None for r in call_items)


def test_the_header_comes_from_the_session(fixtures_dir) -> None:
    header = load_recording(SESSION).header
    assert header["id"] == SESSION_ID
    assert header["created_at"].startswith("2025-12-01T21:45:34.362")
    assert header["title"] == "hi"
    assert header["model"] == "gemini-3-pro-image-preview"
    assert header["meta"]["project_hash"].startswith("fb8e242a")


# --- the small hand-made fixtures -------------------------------------------------------


def test_the_golden_document_reads_in_order(fixtures_dir) -> None:
    recording = load_recording(GOLDEN)
    kinds = [(r["type"], bool(r.get("tool_calls"))) for r in recording.records]
    assert kinds == [
        ("user", False),
        ("assistant", False),
        ("assistant", True),
        ("tool_result", False),
        ("user", False),
        ("assistant", False),
    ]
    assert recording.records[3]["output"] == '{"name": "test-project", "version": "1.0.0"}'
    assert recording.records[1]["output_tokens"] == 60 + 20


def test_a_failed_call_is_an_error_with_the_error_the_model_read(fixtures_dir) -> None:
    recording = load_recording(TOOL_ERROR)
    assert [(r["call_id"], r["is_error"]) for r in results(recording.records)] == [
        ("edit_file-001", False),
        ("edit_file-002", True),
        ("read_file-001", False),
        ("edit_file-003", False),
    ]
    failed = results(recording.records)[1]
    assert failed["output"] == "Failed to edit, 0 occurrences found for old_string"
    assert recording.header["title"] == "Edit the config file to change the port to 9000"


@pytest.mark.parametrize("fixture", [SESSION, GOLDEN, TOOL_ERROR], ids=lambda p: p.name)
def test_every_fixture_is_recognised_by_its_content(fixture: Path, fixtures_dir, tmp_path) -> None:
    renamed = tmp_path / "anything.txt"
    shutil.copyfile(fixture, renamed)
    assert detect(renamed, renamed.read_bytes()) == "gemini"
    digests = [r["source_digest"] for r in load_recording(renamed).records]
    assert len(set(digests)) == len(digests)


def test_a_session_id_that_is_not_a_uuid_gives_a_stable_one(fixtures_dir) -> None:
    first = load_recording(GOLDEN).header
    assert first["meta"]["gemini_id"] == "golden-gemini-001"
    assert load_recording(GOLDEN).header["id"] == first["id"]
    assert first["id"] != load_recording(TOOL_ERROR).header["id"]


# --- JSON Lines: messages appended again, metadata updates, rewinds ----------------------


def test_a_message_appended_again_as_it_changes_gives_its_items_once(tmp_path: Path) -> None:
    masked = tool_call("c1", "[output masked: 4 KB]")
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            METADATA,
            user("u1", "run both"),
            gemini("g1", "Running them."),
            gemini("g1", "Running them.", tool_call("c1", None, status="executing")),
            gemini("g1", "Running them.", tool_call("c1", "first output"), tokens=TOKENS),
            gemini("g1", "Running them.", tool_call("c1", "first output"), tool_call("c2", "two")),
            gemini("g1", "Running them.", masked, tool_call("c2", "two"), tokens=TOKENS),
            {"$set": {"lastUpdated": "2026-02-01T10:01:00.000Z"}},
        ],
    )
    records = load_recording(path).records
    assert [(r["type"], r.get("call_id") or r["text"]) for r in records] == [
        ("user", "run both"),
        ("assistant", "Running them."),
        ("assistant", ""),
        ("tool_result", "c1"),
        ("assistant", ""),
        ("tool_result", "c2"),
    ]
    assert [r["output"] for r in results(records)] == ["first output", "two"]  # not the mask
    assert records[1]["context_tokens"] == 1200 and records[1]["output_tokens"] == 42
    assert [c["id"] for c in calls(records)] == ["c1", "c2"]


def test_a_message_that_gains_calls_later_keeps_the_items_it_had(tmp_path: Path) -> None:
    def digests(*messages: dict[str, Any]) -> list[str]:
        path = write_json(tmp_path / "s.json", {**METADATA, "messages": list(messages)})
        return [r["source_digest"] for r in load_recording(path).records]

    question = user("u1", "go")
    empty = digests(question, gemini("g1", ""))
    with_call = digests(question, gemini("g1", "", tool_call("c1", "one"), tokens=TOKENS))
    with_two = digests(question, gemini("g1", "", tool_call("c1", "one"), tool_call("c2", "2")))

    assert len(empty) == 2 and with_call[:2] == empty
    assert len(with_call) == 4 and with_two[:4] == with_call
    assert len(with_two) == 6


def test_metadata_updates_and_rewinds_are_read(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            METADATA,
            user("u1", "first try"),
            gemini("g1", "Answer one"),
            {"$rewindTo": "u1"},
            user("u2", "second try"),
            {"$set": {"summary": "Trying twice", "sessionId": "someone-else"}},
        ],
    )
    recording = load_recording(path)
    assert [(r["type"], r.get("role"), r["text"]) for r in recording.records] == [
        ("user", None, "first try"),
        ("assistant", None, "Answer one"),
        ("user", "rewind", "(rewound: the conversation went back to before message u1)"),
        ("user", None, "second try"),
    ]
    assert recording.header["title"] == "Trying twice"
    assert recording.header["id"] == METADATA["sessionId"]  # the first id stays the session's


def test_info_and_error_messages_keep_their_role(tmp_path: Path) -> None:
    info = {**user("i1", "Request cancelled."), "type": "info"}
    error = {**user("e1", [{"text": "Quota exceeded"}]), "type": "error"}
    records = load_recording(write_jsonl(tmp_path / "s.jsonl", [METADATA, info, error])).records
    assert [(r["role"], r["text"]) for r in records] == [
        ("info", "Request cancelled."),
        ("error", "Quota exceeded"),
    ]


def test_result_parts_are_read_as_text_never_as_bytes(tmp_path: Path) -> None:
    call = tool_call("c1", "file text")
    call["result"].append({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})
    call["result"].append({"text": "a note"})
    records = load_recording(
        write_jsonl(tmp_path / "s.jsonl", [METADATA, gemini("g1", "", call)])
    ).records
    assert results(records)[0]["output"] == "file text\n[inline data: image/png]\na note"
    assert "iVBORw0KGgo" not in json.dumps(records)


def test_a_torn_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    tail = json.dumps(user("u2", "half written"))[:25]
    path = write_jsonl(tmp_path / "s.jsonl", [METADATA, user("u1", "hello")], tail=tail)
    assert [r["text"] for r in load_recording(path).records] == ["hello"]


def test_a_damaged_line_is_reported_with_its_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([json.dumps(METADATA), "{nope", json.dumps(user("u1", "x"))]) + "\n")
    with pytest.raises(RecordingError) as error:
        load_recording(path)
    assert error.value.line == 2
    assert str(error.value).startswith(f"{path}:2: not JSON")


def test_a_line_of_no_known_kind_is_reported(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [METADATA, {"what": "is this"}])
    with pytest.raises(RecordingError, match=r":2: neither a message, a metadata update"):
        load_recording(path)


def test_a_message_without_a_type_is_reported(tmp_path: Path) -> None:
    document = {**METADATA, "messages": [{"id": "m1", "content": "x"}]}
    with pytest.raises(RecordingError, match=r"messages\[0\] has no type"):
        load_recording(write_json(tmp_path / "s.json", document))


# --- ingest ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_big_output_reads_back_exactly_from_its_blob(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / SESSION.name
    shutil.copyfile(SESSION, path)
    recording = load_recording(path)
    ingest_file(path, store=blob_store())

    session = Session.objects.get(id=SESSION_ID)
    items = list(session.items.order_by("seq"))
    assert [(i.seq, i.type) for i in items] == [(r["seq"], r["type"]) for r in recording.records]
    big = assert_big_outputs_read_back(recording.records, session)
    blobs = [p for p in (data_dir / "blobs").iterdir() if p.is_file()]
    assert big == 7 == len(blobs) == session.blob_count
    assert session.step_count == 10 and session.error_count == 0
    assert session.source_format == "gemini"
    assert session.started_at.isoformat().startswith("2025-12-01T21:45:34")
    assert session.ended_at.isoformat().startswith("2025-12-01T21:50:10")


@pytest.mark.django_db
def test_a_failed_call_counts_as_an_error_of_the_session(fixtures_dir, data_dir: Path) -> None:
    ingest_file(TOOL_ERROR, store=blob_store())
    session = Session.objects.get()
    assert (session.step_count, session.error_count) == (4, 1)
    assert Item.objects.get(is_error=True).call_id == "edit_file-002"


@pytest.mark.django_db
def test_a_document_rewritten_whole_as_it_grows_adds_only_its_new_items(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    full = raw_session()
    # Earlier, as Gemini CLI had written it: up to the message with three calls, which
    # then had its first call only and no tokens yet.
    earlier = copy.deepcopy(full)
    index = next(n for n, m in enumerate(earlier["messages"]) if len(m.get("toolCalls", [])) == 3)
    earlier["messages"] = earlier["messages"][: index + 1]
    earlier["messages"][index]["toolCalls"] = earlier["messages"][index]["toolCalls"][:1]
    del earlier["messages"][index]["tokens"]
    path = write_json(tmp_path / SESSION.name, earlier)
    store = blob_store()

    first = ingest_file(path, store=store)
    before = {i.seq: (i.pk, i.digest) for i in Item.objects.all()}
    grown_message = Item.objects.filter(type=Item.Type.ASSISTANT).order_by("seq").last()
    grown_message = Item.objects.get(seq=grown_message.seq - 1)  # its text, before its call
    assert grown_message.context_tokens is None

    write_json(path, full)
    grown = ingest_file(path, store=store)

    total = len(load_recording(SESSION).records)
    assert grown.new_items == total - first.new_items > 0
    assert {i.seq: (i.pk, i.digest) for i in Item.objects.filter(seq__in=before)} == before
    grown_message.refresh_from_db()
    assert grown_message.context_tokens == full["messages"][index]["tokens"]["input"]
    assert ingest_file(path, store=store).new_items == 0
    assert len([p for p in (data_dir / "blobs").iterdir() if p.is_file()]) == 7


@pytest.mark.django_db
def test_the_json_lines_copy_of_a_session_continues_it(data_dir: Path, tmp_path: Path) -> None:
    # Gemini CLI moves a resumed session-x.json to session-x.jsonl: its metadata, every
    # message again, then what is new.
    messages = [user("u1", "list"), gemini("g1", "Listing.", tool_call("c1", "a\n" * 600))]
    document = write_json(tmp_path / "session-x.json", {**METADATA, "messages": messages})
    store = blob_store()
    assert ingest_file(document, store=store).new_items == 4

    lines = [METADATA, *messages, user("u2", "thanks")]
    tail = json.dumps(gemini("g2", "You're welcome."))
    torn = write_jsonl(tmp_path / "session-x.jsonl", lines, tail=tail[:40])
    resumed = ingest_file(torn, store=store)
    assert resumed.new_items == 1  # the new user message; the torn line waits

    write_jsonl(torn, [*lines, json.loads(tail)])
    assert ingest_file(torn, store=store).new_items == 1
    session = Session.objects.get()
    assert [i.text for i in session.items.order_by("seq")][-2:] == ["thanks", "You're welcome."]
    assert session.blob_count == 1
