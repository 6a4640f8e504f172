"""Codex CLI rollouts: the real run and the small cases in tests/fixtures/real/codex, and
hand-written edge cases (the legacy layout, torn and damaged lines, a grown rollout).

Counts are computed from the raw file here, beside what the fixtures' README states."""

from __future__ import annotations

import json
import re
import shutil
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from blobviewer.data_dir import blob_store
from blobviewer.ingest.errors import IngestError
from blobviewer.ingest.importers import RecordingError, detect, load_recording
from blobviewer.ingest.sessions import ingest_file
from blobviewer.models import Blob, Item, Session
from core.content import utf8_size
from core.store.blob_id import BLOB_REF
from importers.read_back import assert_big_outputs_read_back
from importers.recordings import FIXTURES

CODEX = FIXTURES / "codex"
ROLLOUT = CODEX / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
GOLDEN = CODEX / "codex_golden.jsonl"
COMPACTION = CODEX / "session_with_compaction.jsonl"
ESCALATION = CODEX / "codex_with_escalation.jsonl"
ALL_FIXTURES = [ROLLOUT, GOLDEN, COMPACTION, ESCALATION]
SESSION_ID = "019e1625-789d-76c0-80ab-3724b5ddb799"


# --- the raw file, read independently of the importer ---------------------------------


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def payloads(path: Path, kind: str, *types: str) -> list[dict[str, Any]]:
    return [
        line["payload"]
        for line in raw_lines(path)
        if line["type"] == kind and line["payload"].get("type") in types
    ]


def raw_output_text(payload: dict[str, Any]) -> str:
    """What the model read of an output; apply_patch's is JSON around its `output`."""
    if payload["type"] == "custom_tool_call_output":
        return json.loads(payload["output"])["output"]
    return payload["output"]


def results(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "tool_result"]


def calls(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for r in records if r["type"] == "assistant" for c in r["tool_calls"]]


# --- writing rollouts by hand -----------------------------------------------------------


def line(kind: str, payload: dict[str, Any], at: str = "2026-01-02T10:00:00.000Z") -> str:
    return json.dumps({"timestamp": at, "type": kind, "payload": payload})


def meta(session_id: str = "0199a8e0-0000-7000-8000-000000000001") -> str:
    return line(
        "session_meta",
        {"id": session_id, "timestamp": "2026-01-02T09:59:59.000Z", "cwd": "/work"},
    )


def call(call_id: str, cmd: str, at: str = "2026-01-02T10:00:01.000Z") -> str:
    arguments = json.dumps({"cmd": cmd})
    payload = {"type": "function_call", "name": "exec_command", "arguments": arguments}
    return line("response_item", {**payload, "call_id": call_id}, at)


def output(call_id: str, text: str, at: str = "2026-01-02T10:00:02.000Z") -> str:
    payload = {"type": "function_call_output", "call_id": call_id, "output": text}
    return line("response_item", payload, at)


def user(text: str) -> str:
    content = [{"type": "input_text", "text": text}]
    return line("response_item", {"type": "message", "role": "user", "content": content})


def tokens(context: int, written: int) -> str:
    usage = {"input_tokens": context, "cached_input_tokens": 0, "output_tokens": written}
    info = {"total_token_usage": usage, "last_token_usage": usage}
    return line("event_msg", {"type": "token_count", "info": info})


def write(path: Path, lines: list[str], *, end: str = "\n") -> Path:
    path.write_bytes("".join(text + end for text in lines).encode("utf-8"))
    return path


# --- the real rollout -------------------------------------------------------------------


def test_the_rollout_keeps_every_call_and_output_in_order_and_exactly(fixtures_dir) -> None:
    recording = load_recording(ROLLOUT)
    raw_calls = payloads(ROLLOUT, "response_item", "function_call", "custom_tool_call")
    raw_outputs = payloads(
        ROLLOUT, "response_item", "function_call_output", "custom_tool_call_output"
    )
    texts = [raw_output_text(p) for p in raw_outputs]

    assert recording.format == "codex"
    assert len(raw_calls) == 102 and len(raw_outputs) == 102  # the fixtures' README
    assert sum(utf8_size(text) > 800 for text in texts) == 32
    with_ids = [c for c in calls(recording.records) if c["id"]]
    assert [c["id"] for c in with_ids] == [p["call_id"] for p in raw_calls]
    assert [r["call_id"] for r in results(recording.records)] == [p["call_id"] for p in raw_outputs]
    assert [r["output"] for r in results(recording.records)] == texts
    assert [r["seq"] for r in recording.records] == list(range(1, len(recording.records) + 1))


def test_every_result_answers_a_call_of_an_earlier_assistant_item(fixtures_dir) -> None:
    records = load_recording(ROLLOUT).records
    made: dict[str, str] = {}
    for record in records:
        if record["type"] == "assistant":
            made.update({c["id"]: c["name"] for c in record["tool_calls"]})
        elif record["type"] == "tool_result":
            assert record["call_id"] in made
            assert record["tool"] == made[record["call_id"]]


def test_event_copies_never_become_items(fixtures_dir) -> None:
    records = load_recording(ROLLOUT).records
    copies = payloads(ROLLOUT, "event_msg", "exec_command_end", "patch_apply_end")
    assert len(copies) == 46
    # One result per call id: the exec_command_end / patch_apply_end copies add none.
    call_ids = [r["call_id"] for r in results(records)]
    assert len(call_ids) == len(set(call_ids)) == 102
    # The UI's copies of the messages: each text once, from its response item.
    said = [p["message"] for p in payloads(ROLLOUT, "event_msg", "agent_message")]
    assistant_texts = [r["text"] for r in records if r["type"] == "assistant"]
    assert len(said) == 13
    assert all(assistant_texts.count(text) == 1 for text in said)
    typed = [p["message"] for p in payloads(ROLLOUT, "event_msg", "user_message")]
    user_texts = [r["text"] for r in records if r["type"] == "user"]
    assert all(user_texts.count(text) == 1 for text in typed)
    assert len(records) == len(
        [line for line in raw_lines(ROLLOUT) if line["type"] == "response_item"]
    )


def test_a_command_still_running_keeps_its_notice_never_the_aggregated_output(
    fixtures_dir,
) -> None:
    by_call = {r["call_id"]: r for r in results(load_recording(ROLLOUT).records)}
    ends = payloads(ROLLOUT, "event_msg", "exec_command_end")
    running = [
        e for e in ends if "Process running with session ID" in by_call[e["call_id"]]["output"]
    ]
    assert running  # most commands outlived their call in this run
    outputs = {r["output"] for r in by_call.values()}
    failed_by_a_poll = commands_failed_by_their_polls(ROLLOUT)
    assert failed_by_a_poll  # some of them failed, as a later poll said
    for end in running:
        # Its exit is a poll's news: the command's step fails when that poll says it did.
        assert by_call[end["call_id"]]["is_error"] is (end["call_id"] in failed_by_a_poll)
        if end["aggregated_output"]:
            assert end["aggregated_output"] not in outputs


def commands_failed_by_their_polls(path: Path) -> set[str]:
    """The call ids of commands that returned while running and whose exit, reported by
    a later `write_stdin` poll of their session, was not 0 (read from the raw file)."""
    started: dict[str, str] = {}  # session id -> the call that started it
    failed = set()
    exit_code = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)
    outputs = payloads(path, "response_item", "function_call", "function_call_output")
    calls = {p["call_id"]: p for p in outputs if p["type"] == "function_call"}
    for payload in outputs:
        if payload["type"] != "function_call_output":
            continue
        call = calls[payload["call_id"]]
        text = payload["output"]
        if call["name"] == "write_stdin":
            session = str(json.loads(call["arguments"]).get("session_id"))
            code = exit_code.search(text[:400])
            if session in started and code is not None:
                if code.group(1) != "0":
                    failed.add(started[session])
                del started[session]
        elif running := re.search(r"^Process running with session ID (\d+)", text, re.M):
            started.setdefault(running.group(1), payload["call_id"])
    return failed


def test_write_stdin_polls_stay_steps_of_their_own(fixtures_dir) -> None:
    records = load_recording(ROLLOUT).records
    polls = [c for c in calls(records) if c["name"] == "write_stdin"]
    raw_polls = [
        p for p in payloads(ROLLOUT, "response_item", "function_call") if p["name"] == "write_stdin"
    ]
    assert len(polls) == len(raw_polls) == 54
    by_session: dict[int, int] = {}
    for poll in polls:
        by_session[poll["arguments"]["session_id"]] = (
            by_session.get(poll["arguments"]["session_id"], 0) + 1
        )
    assert max(by_session.values()) > 1  # one command polled more than once
    answered = {r["call_id"] for r in results(records)}
    assert all(poll["id"] in answered for poll in polls)


def test_exit_codes_in_outputs_mark_the_failed_steps(fixtures_dir) -> None:
    records = results(load_recording(ROLLOUT).records)
    exit_code = re.compile(r"^Process exited with code (\d+)$", re.MULTILINE)
    failed = [
        r["call_id"]
        for r in records
        if (m := exit_code.search(r["output"][:400])) is not None and m.group(1) != "0"
    ]
    assert len(failed) == 4
    # And the poll Codex could not make: `write_stdin failed: stdin is closed …`.
    refused = [r["call_id"] for r in records if r["output"].startswith("write_stdin failed:")]
    assert refused == ["call_T8WFc2EjJV2QZKr07SfDPwmE"]
    # And the commands whose failed exit a later poll reported.
    commands = commands_failed_by_their_polls(ROLLOUT)
    errors = [r["call_id"] for r in records if r["is_error"]]
    assert sorted(errors) == sorted(failed + refused + list(commands))


def test_apply_patch_shows_its_output_text(fixtures_dir) -> None:
    records = load_recording(ROLLOUT).records
    patches = [c for c in calls(records) if c["name"] == "apply_patch"]
    raw = payloads(ROLLOUT, "response_item", "custom_tool_call")
    assert [c["arguments"] for c in patches] == [p["input"] for p in raw]
    by_call = {r["call_id"]: r for r in results(records)}
    for payload in payloads(ROLLOUT, "response_item", "custom_tool_call_output"):
        result = by_call[payload["call_id"]]
        assert result["output"] == json.loads(payload["output"])["output"]
        assert result["output"].startswith("Success.")
        assert result["is_error"] is False


def test_tokens_go_on_the_first_item_of_each_model_response(fixtures_dir) -> None:
    records = load_recording(ROLLOUT).records
    counts = [p["info"] for p in payloads(ROLLOUT, "event_msg", "token_count") if p.get("info")]
    with_tokens = [r for r in records if "output_tokens" in r]
    assert len(with_tokens) == len(counts) == 66
    assert [r["context_tokens"] for r in with_tokens] == [
        c["last_token_usage"]["input_tokens"] for c in counts
    ]
    assert (
        sum(r["output_tokens"] for r in with_tokens)
        == counts[-1]["total_token_usage"]["output_tokens"]
    )
    for record in with_tokens:
        assert record["type"] == "assistant"
        previous = records[record["seq"] - 2]
        assert previous["type"] != "assistant"  # the response's first item


def test_times_model_title_and_status_come_from_the_rollout(fixtures_dir) -> None:
    recording = load_recording(ROLLOUT)
    stamped = [line for line in raw_lines(ROLLOUT) if line["type"] == "response_item"]
    assert [r["at"][:23] for r in recording.records] == [
        line["timestamp"].replace("Z", "")[:23] for line in stamped
    ]
    assert recording.header["id"] == SESSION_ID
    assert recording.header["created_at"].startswith("2026-05-11T08:26:55.042")
    assert recording.header["model"] == "gpt-5.5"
    assert recording.header["title"] == "show tools"  # what the user typed, not AGENTS.md
    assert recording.header["status"] == "task_complete"
    assert recording.header["meta"]["cli_version"] == "0.125.0"
    roles = [r.get("role") for r in recording.records if r["type"] == "user"]
    assert roles == ["developer", "context", None, None]


@pytest.mark.parametrize(
    "prompt",
    [
        "# Files mentioned by the user:\n\n## app.py: /work/app.py\n\n"
        "## My request for Codex:\nfix the failing test\nand say why\n",
        "# Context from my IDE setup:\n\n## Active file: app.py\n\n## Open tabs:\n"
        "- app.py: app.py\n\n## My request for Codex:\n\nfix the failing test\n",
    ],
    ids=["files mentioned", "IDE context"],
)
def test_the_title_is_the_request_not_the_ide_extensions_preamble(prompt, tmp_path) -> None:
    event = line("event_msg", {"type": "user_message", "message": prompt})
    path = write(tmp_path / "rollout.jsonl", [meta(), user(prompt), event])
    assert load_recording(path).header["title"] == "fix the failing test"


def test_a_prompt_without_the_request_heading_is_its_own_title(tmp_path) -> None:
    prompt = "# Plan\nrefactor the parser"
    path = write(tmp_path / "rollout.jsonl", [meta(), user(prompt)])
    assert load_recording(path).header["title"] == "# Plan"


def test_reasoning_shows_that_it_happened_never_its_encrypted_bytes(fixtures_dir) -> None:
    records = load_recording(ROLLOUT).records
    raw = payloads(ROLLOUT, "response_item", "reasoning")
    shown = [r for r in records if r["type"] == "assistant" and r["text"].startswith("(reasoning")]
    assert len(shown) == len(raw) == 25
    everything = json.dumps(records)
    assert not any(p["encrypted_content"][:40] in everything for p in raw)


def test_web_searches_are_calls_without_id_or_result(fixtures_dir) -> None:
    records = load_recording(ROLLOUT).records
    searches = [c for c in calls(records) if c["name"] == "web_search"]
    raw = payloads(ROLLOUT, "response_item", "web_search_call")
    assert len(searches) == len(raw) == 3
    assert [s["arguments"] for s in searches] == [p["action"] for p in raw]
    assert all(s["id"] == "" for s in searches)
    assert all(r["call_id"] for r in results(records))


# --- the small hand-made fixtures -------------------------------------------------------


def test_a_compacted_record_is_shown_as_such(fixtures_dir) -> None:
    records = load_recording(COMPACTION).records
    raw = [line["payload"] for line in raw_lines(COMPACTION) if line["type"] == "compacted"]
    compacted = [r for r in records if r.get("role") == "compacted"]
    assert len(compacted) == len(raw) == 1
    assert compacted[0]["type"] == "user"
    assert compacted[0]["text"] == "(context compacted)\n\n" + raw[0]["message"]
    # What came before and after it is all there, in order.
    position = records.index(compacted[0])
    assert [r["text"] for r in records[position - 1 : position + 2] if r["type"] == "user"][
        -1
    ] == "Now add the authentication middleware"
    assert len(results(records)) == 2


def test_an_aborted_turn_is_shown_and_its_calls_stay_without_result(fixtures_dir) -> None:
    recording = load_recording(ESCALATION)
    aborted = [r for r in recording.records if r.get("role") == "aborted"]
    assert [r["text"] for r in aborted] == ["(turn aborted: user_cancelled)"]
    assert recording.header["status"] == "turn_aborted: user_cancelled"
    answered = {r["call_id"] for r in results(recording.records)}
    unanswered = [c["id"] for c in calls(recording.records) if c["id"] not in answered]
    assert unanswered == ["call_esc_002", "call_esc_004"]
    # The token count after the abort belongs to the response the abort cut short.
    with_tokens = [r for r in recording.records if "context_tokens" in r]
    assert [(r["tool_calls"][0]["id"], r["context_tokens"]) for r in with_tokens] == [
        ("call_esc_004", 200)
    ]


def test_a_reasoning_summary_is_shown(fixtures_dir) -> None:
    records = load_recording(GOLDEN).records
    assert records[1]["text"] == "(reasoning) Preparing to list directory contents"
    assert records[-1]["context_tokens"] == 150 and records[-1]["output_tokens"] == 75


@pytest.mark.parametrize("fixture", ALL_FIXTURES, ids=lambda p: p.name)
def test_every_fixture_is_recognised_by_its_content(fixture: Path, fixtures_dir, tmp_path) -> None:
    renamed = tmp_path / "anything.json"
    shutil.copyfile(fixture, renamed)
    assert detect(renamed, renamed.read_bytes()) == "codex"
    digests = [r["source_digest"] for r in load_recording(renamed).records]
    assert len(set(digests)) == len(digests)


# --- the legacy layout ------------------------------------------------------------------

LEGACY_ID = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"


def legacy_lines() -> list[str]:
    wrapped = json.dumps(
        {"output": "boom\r\nfailed here\r\n", "metadata": {"exit_code": 1, "duration_seconds": 0.1}}
    )
    return [
        json.dumps(
            {
                "id": LEGACY_ID,
                "timestamp": "2025-04-20T08:15:00.123Z",
                "instructions": None,
                "git": {"commit_hash": "abc", "branch": "main"},
            }
        ),
        json.dumps({"record_type": "state"}),
        json.dumps(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "run the tests\r\nplease"}],
            }
        ),
        json.dumps({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
        json.dumps(
            {
                "type": "function_call",
                "id": "fc_1",
                "name": "shell",
                "arguments": json.dumps({"command": ["bash", "-lc", "pytest"]}),
                "call_id": "call_1",
            }
        ),
        json.dumps({"record_type": "state"}),
        json.dumps({"type": "function_call_output", "call_id": "call_1", "output": wrapped}),
        json.dumps(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "It failed."}],
            }
        ),
    ]


def test_the_legacy_layout_with_crlf_lines_is_read(tmp_path: Path) -> None:
    path = write(tmp_path / "rollout-legacy.jsonl", legacy_lines(), end="\r\n")
    assert detect(path, path.read_bytes()) == "codex"
    recording = load_recording(path)

    assert recording.header["id"] == LEGACY_ID
    assert recording.header["created_at"].startswith("2025-04-20T08:15:00.123")
    assert recording.header["meta"]["layout"] == "legacy"
    assert recording.header["title"] == "run the tests"
    kinds = [
        (r["type"], r["text"] if r["type"] != "tool_result" else r["output"])
        for r in recording.records
    ]
    assert kinds == [
        ("user", "run the tests\r\nplease"),
        ("assistant", "(reasoning, encrypted)"),
        ("assistant", ""),
        ("tool_result", "boom\r\nfailed here\r\n"),  # the output's own text, \r\n kept
        ("assistant", "It failed."),
    ]
    result = recording.records[3]
    assert result["is_error"] is True  # metadata.exit_code 1
    assert result["tool"] == "shell"
    assert recording.records[2]["tool_calls"][0]["arguments"] == {
        "command": ["bash", "-lc", "pytest"]
    }
    assert all(r["at"] is None for r in recording.records)  # the layout has no times


def test_the_legacy_layout_reads_the_same_with_lf_or_crlf(tmp_path: Path) -> None:
    crlf = load_recording(write(tmp_path / "a.jsonl", legacy_lines(), end="\r\n"))
    lf = load_recording(write(tmp_path / "b.jsonl", legacy_lines()))
    assert crlf.records == lf.records


# --- damaged, torn and joined --------------------------------------------------------------


def test_a_damaged_line_is_reported_with_its_path_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [meta(), user("hi"), "{not json", user("again")])
    with pytest.raises(RecordingError) as error:
        load_recording(path)
    assert error.value.line == 3
    assert str(error.value).startswith(f"{path}:3: not JSON")


def test_a_line_that_is_not_an_object_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [meta(), "[1, 2]"])
    with pytest.raises(RecordingError, match=r":2: each line must be a JSON object"):
        load_recording(path)


def test_an_output_without_call_id_is_reported(tmp_path: Path) -> None:
    bad = line("response_item", {"type": "function_call_output", "output": "x"})
    with pytest.raises(RecordingError, match=r":2: a function_call_output without call_id"):
        load_recording(write(tmp_path / "r.jsonl", [meta(), bad]))


def test_a_torn_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    complete = [meta(), user("list files"), call("c1", "ls")]
    torn = output("c1", "a\nb\n")
    path = tmp_path / "r.jsonl"
    path.write_text("".join(t + "\n" for t in complete) + torn[:30], encoding="utf-8")
    assert [r["type"] for r in load_recording(path).records] == ["user", "assistant"]


def test_exit_codes_of_end_events_join_their_call_but_add_no_item(tmp_path: Path) -> None:
    end = {"type": "exec_command_end", "call_id": "c1", "exit_code": 3, "aggregated_output": "x"}
    still = {"type": "exec_command_end", "call_id": "c2", "exit_code": 1, "aggregated_output": "y"}
    patched = {"type": "patch_apply_end", "call_id": "c3", "success": False, "stdout": "no"}
    apply = {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch"}
    patch_output = json.dumps({"output": "rejected", "metadata": {"exit_code": 1}})
    path = write(
        tmp_path / "r.jsonl",
        [
            meta(),
            call("c1", "false"),
            output("c1", "plain text, no header"),
            line("event_msg", end),
            call("c2", "sleep 5; false"),
            output("c2", "Chunk ID: 1\nProcess running with session ID 7\nOutput:\n"),
            line("event_msg", still),
            line("response_item", {**apply, "call_id": "c3"}),
            line("event_msg", patched),
            line(
                "response_item",
                {"type": "custom_tool_call_output", "call_id": "c3", "output": patch_output},
            ),
        ],
    )
    records = load_recording(path).records
    assert [(r["call_id"], r["output"], r["is_error"]) for r in results(records)] == [
        ("c1", "plain text, no header", True),
        ("c2", "Chunk ID: 1\nProcess running with session ID 7\nOutput:\n", False),
        ("c3", "rejected", True),
    ]
    assert len(records) == 6


def test_a_session_id_that_is_not_a_uuid_gives_a_stable_one(tmp_path: Path) -> None:
    first = load_recording(write(tmp_path / "a.jsonl", [meta("not-a-uuid"), user("x")]))
    again = load_recording(write(tmp_path / "b.jsonl", [meta("not-a-uuid"), user("y")]))
    other = load_recording(write(tmp_path / "c.jsonl", [meta("another"), user("x")]))
    assert first.header["id"] == again.header["id"] != other.header["id"]
    assert first.header["meta"]["codex_id"] == "not-a-uuid"


# --- ingest ---------------------------------------------------------------------------------


def ingest(*paths: Path) -> str:
    out = StringIO()
    call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_every_big_output_reads_back_exactly_from_its_blob(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / ROLLOUT.name
    shutil.copyfile(ROLLOUT, path)
    recording = load_recording(path)
    ingest(path)

    session = Session.objects.get(id=SESSION_ID)
    items = list(session.items.order_by("seq"))
    assert [(i.seq, i.type) for i in items] == [(r["seq"], r["type"]) for r in recording.records]
    big = assert_big_outputs_read_back(recording.records, session)
    blobs = [p for p in (data_dir / "blobs").iterdir() if p.is_file()]
    assert big == 32 == len(blobs) == session.blob_count  # none from the event copies
    assert session.items.filter(type=Item.Type.TOOL_RESULT).count() == 102


@pytest.mark.django_db
def test_the_session_holds_the_rollouts_facts(fixtures_dir, data_dir: Path) -> None:
    ingest_file(ROLLOUT, store=blob_store())
    session = Session.objects.get(id=SESSION_ID)
    assert session.source_format == "codex"
    assert session.step_count == 102  # every result paired with its call
    # Four failed exits, reported by polls of commands that then fail too, and one poll
    # Codex refused.
    assert session.error_count == 4 + len(commands_failed_by_their_polls(ROLLOUT)) + 1
    assert session.status == "task_complete"
    assert session.model == "gpt-5.5"
    assert session.started_at.isoformat().startswith("2026-05-11T08:26:55")
    last = [line for line in raw_lines(ROLLOUT) if line["type"] == "response_item"][-1]
    assert session.ended_at.isoformat()[:23] == last["timestamp"][:23]
    assert session.duration is not None
    turns = session.items.filter(type=Item.Type.ASSISTANT, context_tokens__isnull=False)
    assert turns.count() == 66


@pytest.mark.django_db
@pytest.mark.parametrize("fixture", [GOLDEN, COMPACTION, ESCALATION], ids=lambda p: p.name)
def test_the_small_fixtures_ingest_twice_without_doubles(
    fixture: Path, fixtures_dir, data_dir: Path
) -> None:
    store = blob_store()
    first = ingest_file(fixture, store=store)
    again = ingest_file(fixture, store=store)
    assert first.new_items == len(load_recording(fixture).records) > 0
    assert again.new_items == 0
    assert Item.objects.count() == first.new_items


@pytest.mark.django_db
def test_a_grown_rollout_adds_only_its_new_items(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    lines = ROLLOUT.read_text(encoding="utf-8").splitlines(keepends=True)
    # Cut right after a call, before the token_count of its response and its output.
    cut = next(n for n, text in enumerate(lines) if '"call_Y2p6KmqwoTtpi6atpDPuxC5M"' in text) + 1
    path = tmp_path / ROLLOUT.name
    path.write_text("".join(lines[:cut]), encoding="utf-8")
    store = blob_store()

    first = ingest_file(path, store=store)
    before = {i.seq: (i.pk, i.digest) for i in Item.objects.all()}
    reasoning = Item.objects.get(seq=4)
    assert reasoning.context_tokens is None  # its token_count is not written yet

    path.write_text("".join(lines), encoding="utf-8")
    grown = ingest_file(path, store=store)

    total = len(load_recording(ROLLOUT).records)
    assert first.new_items == len(before) == 5
    assert grown.new_items == total - 5
    assert {i.seq: (i.pk, i.digest) for i in Item.objects.filter(seq__lte=5)} == before
    reasoning.refresh_from_db()
    assert reasoning.context_tokens == 18703 and reasoning.output_tokens == 167
    assert ingest_file(path, store=store).new_items == 0
    assert len(list((data_dir / "blobs").glob("*.*"))) == 32


@pytest.mark.django_db
def test_a_torn_line_is_ingested_once_it_is_complete(data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    head = "".join(t + "\n" for t in [meta(), user("list files"), call("c1", "ls")])
    torn = output("c1", "x" * 2000)
    store = blob_store()

    path.write_text(head + torn[:100], encoding="utf-8")
    assert ingest_file(path, store=store).new_items == 2
    path.write_text(head + torn + "\n", encoding="utf-8")
    result = ingest_file(path, store=store)

    assert result.new_items == 1
    item = Item.objects.get(type=Item.Type.TOOL_RESULT)
    assert store.load_sync(BLOB_REF.match(item.output).group(1)).text == "x" * 2000


@pytest.mark.django_db
def test_a_damaged_rollout_is_refused_in_one_line_and_the_others_go_in(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    bad = write(folder / "a-bad.jsonl", [meta(), "{oops", user("x")])
    shutil.copyfile(GOLDEN, folder / "b-good.jsonl")
    with pytest.raises(IngestError, match=rf"^{re.escape(str(bad))}:2: not JSON"):
        ingest_file(bad, store=blob_store())

    err = StringIO()
    with pytest.raises(CommandError, match="1 path"):
        call_command("ingest", str(folder), stdout=StringIO(), stderr=err)
    assert f"{bad}:2: not JSON" in err.getvalue()
    assert Session.objects.get().source_format == "codex"


def poll(call_id: str, session: int, at: str = "2026-01-02T10:00:03.000Z") -> str:
    arguments = json.dumps({"session_id": session, "chars": "", "yield_time_ms": 1000})
    payload = {"type": "function_call", "name": "write_stdin", "arguments": arguments}
    return line("response_item", {**payload, "call_id": call_id}, at)


NPM_TEST = [
    meta(),
    user("run the tests"),
    call("c1", "npm test"),
    output("c1", "Chunk ID: 1\nProcess running with session ID 7\nOutput:\n> jest\n"),
    poll("p1", 7),
    output("p1", "Chunk ID: 2\nProcess running with session ID 7\nOutput:\nPASS a.test.js\n"),
    poll("p2", 7),
    output("p2", "Chunk ID: 3\nProcess exited with code 2\nOutput:\nFAIL b.test.js\n"),
]


def test_a_poll_names_its_command_and_its_exit_fails_the_commands_step(tmp_path) -> None:
    records = results(load_recording(write(tmp_path / "rollout.jsonl", NPM_TEST)).records)

    started, first, last = records
    assert started["is_error"] is True  # npm test failed, as its last poll reported
    assert (first["note"], first["is_error"]) == ("poll 1 of `npm test`", False)
    assert (last["note"], last["is_error"]) == ("poll 2 of `npm test`", True)


@pytest.mark.django_db
def test_a_grown_rollout_fails_a_command_its_new_poll_reports(data_dir, tmp_path) -> None:
    path = write(tmp_path / "rollout.jsonl", NPM_TEST[:-2])
    ingest_file(path, store=blob_store())
    command = Item.objects.get(call_id="c1", type=Item.Type.TOOL_RESULT)
    assert command.is_error is False and command.session.error_count == 0

    write(path, NPM_TEST)  # the last poll arrives
    ingest_file(path, store=blob_store())

    command.refresh_from_db()
    assert command.is_error is True
    session = Session.objects.get(id=command.session_id)
    assert session.error_count == 2  # the command and the poll that said so


@pytest.mark.django_db
def test_a_polls_step_and_blob_are_titled_by_its_command(data_dir, tmp_path, client) -> None:
    long_tail = "".join(f"FAIL test {n}\n" for n in range(100))  # promoted: a blob
    lines = [*NPM_TEST[:-1], output("p2", f"Process exited with code 2\nOutput:\n{long_tail}")]
    ingest_file(write(tmp_path / "rollout.jsonl", lines), store=blob_store())

    polls = [c for i in Item.objects.filter(type="assistant") for c in i.tool_calls]
    assert [c.get("title") for c in polls if c["name"] == "write_stdin"] == [
        "npm test · poll 1",
        "npm test · poll 2",
    ]
    assert Blob.objects.get().made_by_title == "npm test · poll 2"

    client.force_login(User.objects.create_user("reader"))
    session = Item.objects.first().session
    page = client.get(session.get_absolute_url()).content.decode()
    started = Item.objects.get(call_id="c1", type="tool_result").seq
    assert f'<a class="call-title" href="#step-{started}">npm test · poll 2</a>' in page
    biggest = client.get(session.get_absolute_url(), {"outline": "biggest"}).content.decode()
    assert "npm test · poll 2</a>" in biggest
    # A search hit in the poll's blob, or in its output, names the step by the title too.
    hits = client.get("/", {"q": "FAIL test 42"}).content.decode()
    assert "blob of #" in hits and "npm test · poll 2</a>" in hits
    hits = client.get("/", {"q": "PASS a.test"}).content.decode()
    assert "npm test · poll 1 output</a>" in hits
