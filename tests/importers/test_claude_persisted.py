"""Claude Code 2.1's persisted outputs: a big result replaced by a `<persisted-output>` note
and a 2 KB preview is stored whole — from the line's `toolUseResult`, else from
`<session>/tool-results/<tool_use_id>.txt` beside the log — and the step says where the
whole output came from, or that the recording did not have it."""

from __future__ import annotations

import json
import re
import shutil
from html import unescape
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from blobviewer.data_dir import blob_store
from blobviewer.ingest.importers import claude_code, load_recording
from blobviewer.models import Item, Session
from core.store.blob_id import BLOB_REF
from importers.recordings import FIXTURES, claude_line, write_jsonl

PERSISTING = FIXTURES / "claude_code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
PERSISTED_CALL = "toolu_019CpL49DWBenUxVVCWEXz3L"
SESSION = "5d0c7e0e-9f1a-4c55-a3c1-2b7f4e1d9a01"


def persisted_line(path: Path) -> dict[str, Any]:
    """The fixture's line whose result Claude Code persisted, read from the raw file."""
    lines = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
    (line,) = [
        entry
        for entry in lines
        if entry.get("type") == "user"
        and any(
            isinstance(block, dict)
            and block.get("type") == "tool_result"
            and "<persisted-output>" in json.dumps(block.get("content"))
            for block in entry["message"]["content"]
        )
    ]
    return line


def persisted_note(call_id: str, whole: str) -> str:
    """A result text as Claude Code writes it when it persists *whole*."""
    preview = whole[:2000]
    return (
        "<persisted-output>\n"
        f"Output too large ({len(whole) // 1024}KB). Full output saved to: "
        f"/home/someone/.claude/projects/-x/{SESSION}/tool-results/{call_id}.txt\n\n"
        f"Preview (first 2KB):\n{preview}\n...\n</persisted-output>"
    )


def session_log(folder: Path, call_id: str, note: str, **result_line: Any) -> Path:
    """A small Claude Code session whose one result is *note*, as `<folder>/<id>.jsonl`."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        {**claude_line("user", "grep the logs"), "sessionId": SESSION},
        {
            **claude_line(
                "assistant",
                [{"type": "tool_use", "id": call_id, "name": "Grep", "input": {"pattern": "x"}}],
            ),
            "sessionId": SESSION,
        },
        {
            **claude_line(
                "user", [{"type": "tool_result", "tool_use_id": call_id, "content": note}]
            ),
            "sessionId": SESSION,
            **result_line,
        },
    ]
    return write_jsonl(folder / f"{SESSION}.jsonl", lines)


def whole_text(lines: int = 3000) -> str:
    return "".join(f"match {n}: some log line with a bit of text\n" for n in range(lines))


def ingest(path: Path) -> str:
    out = StringIO()
    call_command("ingest", str(path), stdout=out, stderr=StringIO())
    return out.getvalue()


def result_item(call_id: str) -> Item:
    return Item.objects.get(type=Item.Type.TOOL_RESULT, call_id=call_id)


def blob_bytes(item: Item) -> bytes:
    blob_id = BLOB_REF.match(item.output).group(1)
    return blob_store().path_of(blob_id).read_bytes()


# --- the real recording ---------------------------------------------------------------


def test_the_fixtures_persisted_result_is_its_tool_use_results_stdout(fixtures_dir) -> None:
    stdout = persisted_line(PERSISTING)["toolUseResult"]["stdout"]
    recording = load_recording(PERSISTING)
    (record,) = [
        r
        for r in recording.records
        if r.get("call_id") == PERSISTED_CALL and r["type"] == "tool_result"
    ]
    assert record["output"] == stdout
    assert record["note"] == claude_code.FROM_TOOL_USE_RESULT
    noted = [r for r in recording.records if r.get("note")]
    assert noted == [record]  # no other result was persisted


@pytest.mark.django_db
def test_the_fixtures_blob_holds_stdout_byte_for_byte(fixtures_dir, data_dir: Path) -> None:
    stdout = persisted_line(PERSISTING)["toolUseResult"]["stdout"]
    ingest(PERSISTING)
    item = result_item(PERSISTED_CALL)
    assert blob_bytes(item) == stdout.encode("utf-8")
    assert item.received_bytes == len(stdout.encode("utf-8")) > 100_000
    assert item.note == claude_code.FROM_TOOL_USE_RESULT
    assert "<persisted-output>" not in item.output  # the summary of the whole output


@pytest.mark.django_db
def test_the_note_is_shown_on_the_step(fixtures_dir, data_dir: Path, admin_client) -> None:
    ingest(PERSISTING)
    item = result_item(PERSISTED_CALL)
    url = reverse("session_detail", args=[item.session_id])
    html = ""
    for page in range(1, 40):  # the step is on one of the timeline's pages
        html = admin_client.get(url, {"page": page}).content.decode()
        if f'id="item-{item.seq}"' in html:
            break
    result = re.search(rf'<div class="result" id="item-{item.seq}">.*?</div>', html, re.S)
    assert result is not None
    notes = re.findall(r'<p class="note importer-note">([^<]*)</p>', result.group(0))
    assert [unescape(n) for n in notes] == [claude_code.FROM_TOOL_USE_RESULT]


# --- hand-built sessions --------------------------------------------------------------


@pytest.mark.django_db
def test_without_stdout_the_whole_output_comes_from_tool_results(
    data_dir: Path, tmp_path: Path
) -> None:
    whole = whole_text()
    project = tmp_path / "projects" / "-home-someone-x"
    log = session_log(
        project,
        "toolu_01Grep",
        persisted_note("toolu_01Grep", whole),
        toolUseResult={"mode": "content"},
    )
    results = project / SESSION / "tool-results"
    results.mkdir(parents=True)
    (results / "toolu_01Grep.txt").write_text(whole, encoding="utf-8")

    out = ingest(project)

    assert "1 of 1 files ingested" in out  # the .txt beside it is no recording
    item = result_item("toolu_01Grep")
    assert blob_bytes(item) == whole.encode("utf-8")
    assert (
        item.note
        == "persisted by Claude Code; full output recovered from tool-results/toolu_01Grep.txt"
    )
    assert log.exists()


@pytest.mark.django_db
def test_when_neither_has_it_the_preview_is_stored_and_the_note_says_so(
    data_dir: Path, tmp_path: Path
) -> None:
    note = persisted_note("toolu_01Grep", whole_text())
    ingest(session_log(tmp_path, "toolu_01Grep", note))
    item = result_item("toolu_01Grep")
    assert blob_bytes(item) == note.encode("utf-8")  # what the model saw, preview and all
    assert item.note == claude_code.NOT_RECORDED
    assert "was not in the recording" in item.note


def test_a_tool_results_file_that_is_not_what_the_preview_shows_is_not_taken(
    tmp_path: Path,
) -> None:
    log = session_log(tmp_path, "toolu_01Grep", persisted_note("toolu_01Grep", whole_text()))
    results = tmp_path / SESSION / "tool-results"
    results.mkdir(parents=True)
    (results / "toolu_01Grep.txt").write_text("another run's output\n" * 500, encoding="utf-8")
    (record,) = [r for r in load_recording(log).records if r["type"] == "tool_result"]
    assert record["note"] == claude_code.NOT_RECORDED


def test_a_call_id_never_names_a_file_outside_tool_results(tmp_path: Path) -> None:
    whole = whole_text()
    call_id = "../../secret"
    log = session_log(tmp_path / "p", call_id, persisted_note("x", whole))
    (tmp_path / "secret.txt").write_text(whole, encoding="utf-8")
    (tmp_path / "p" / SESSION / "tool-results").mkdir(parents=True)
    (record,) = [r for r in load_recording(log).records if r["type"] == "tool_result"]
    assert record["output"].startswith("<persisted-output>")
    assert record["note"] == claude_code.NOT_RECORDED


def test_stderr_follows_stdout_on_a_line_of_its_own(tmp_path: Path) -> None:
    stdout, stderr = whole_text(), "warning: something\n"
    log = session_log(
        tmp_path,
        "toolu_01Bash",
        persisted_note("toolu_01Bash", stdout + stderr),
        toolUseResult={"stdout": stdout.rstrip("\n"), "stderr": stderr, "interrupted": False},
    )
    (record,) = [r for r in load_recording(log).records if r["type"] == "tool_result"]
    assert record["output"] == stdout + stderr
    assert record["note"] == claude_code.FROM_TOOL_USE_RESULT


def test_a_result_that_was_not_persisted_keeps_its_text_and_has_no_note(tmp_path: Path) -> None:
    log = session_log(
        tmp_path, "toolu_01Bash", "short", toolUseResult={"stdout": "much longer", "stderr": ""}
    )
    (record,) = [r for r in load_recording(log).records if r["type"] == "tool_result"]
    assert record["output"] == "short" and "note" not in record


# --- sessions recorded before this importer version -----------------------------------


@pytest.mark.django_db
def test_a_rebuild_replaces_an_old_sessions_preview_with_the_whole_output(
    fixtures_dir, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / PERSISTING.name
    shutil.copyfile(PERSISTING, path)
    stdout = persisted_line(path)["toolUseResult"]["stdout"]
    with monkeypatch.context() as old:  # the previous importer: previews stored as they were
        old.setattr(claude_code, "IMPORTER_VERSION", claude_code.IMPORTER_VERSION - 1)
        old.setattr(claude_code, "_whole_output", lambda path, entry, call_id, text: (text, None))
        ingest(path)
    before = result_item(PERSISTED_CALL)
    assert blob_bytes(before).startswith(b"<persisted-output>") and before.note == ""

    plain = ingest(path)
    assert "run manage.py ingest --rebuild" in plain
    out = StringIO()
    call_command("ingest", "--rebuild", str(path), stdout=out)

    after = result_item(PERSISTED_CALL)
    assert after.seq == before.seq and blob_bytes(after) == stdout.encode("utf-8")
    assert after.note == claude_code.FROM_TOOL_USE_RESULT
    session = Session.objects.get()
    assert session.importer_version == claude_code.IMPORTER_VERSION
