"""`manage.py ingest` on other agents' recordings: promotion on the way in, exact blobs,
items in order, idempotency, and what it saves."""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from blobviewer.ingest.importers import load_recording
from blobviewer.models import Item, Session
from core.agent.policy import DEFAULT_POLICY
from core.content import Stored, utf8_size
from core.promotion import promote
from core.store.blob_id import BLOB_REF
from importers.recordings import (
    CLAUDE_CODE,
    MINI_SWE_AGENT,
    SWE_AGENT_CLASSIC,
    write_json,
)

pytestmark = pytest.mark.django_db

FIXTURES = [CLAUDE_CODE, MINI_SWE_AGENT, SWE_AGENT_CLASSIC]


def ingest(*paths: Path) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def blob_files(data_dir: Path) -> list[str]:
    return sorted(p.name for p in (data_dir / "blobs").iterdir())


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    """The real fixtures, copied (they are read-only and must not be edited)."""
    folder = tmp_path / "recordings"
    folder.mkdir()
    for fixture in FIXTURES:
        shutil.copyfile(fixture, folder / fixture.name)
    return folder


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_every_big_output_reads_back_exactly_and_every_item_is_in_order(
    fixture: Path, recordings: Path, store, data_dir: Path
) -> None:
    path = recordings / fixture.name
    recording = load_recording(path)
    ingest(path)

    session = Session.objects.get(id=recording.header["id"])
    assert session.source_format == recording.format
    items = list(session.items.order_by("seq"))
    assert [(i.seq, i.type) for i in items] == [(r["seq"], r["type"]) for r in recording.records]

    big = 0
    for item, record in zip(items, recording.records, strict=True):
        if record["type"] != "tool_result":
            continue
        original = record["output"]
        promoted = promote(original)
        if not isinstance(promoted, Stored):
            assert item.output == original
            continue
        big += 1
        assert utf8_size(original) > DEFAULT_POLICY.inline_limit
        assert utf8_size(item.output) <= DEFAULT_POLICY.summary_limit
        match = BLOB_REF.match(item.output)
        assert match, item.output[:80]
        assert store.load_sync(match.group(1)) == promoted.content
        assert item.received_bytes == utf8_size(original)
        assert item.blob_refs.get().blob.missing is False
    # one blob per big output: Claude Code's toolUseResult copies are not stored again
    assert len(blob_files(data_dir)) == big == session.blob_count > 0


def test_the_fixtures_keep_most_tool_output_out_of_the_history(
    recordings: Path, store, data_dir: Path
) -> None:
    ingest(recordings)
    for fixture in FIXTURES:
        recording = load_recording(recordings / fixture.name)
        session = Session.objects.get(id=recording.header["id"])
        outputs = [r["output"] for r in recording.records if r["type"] == "tool_result"]
        assert session.output_bytes_received == sum(utf8_size(o) for o in outputs)
        in_history = sum(
            utf8_size(i.output) for i in session.items.filter(type=Item.Type.TOOL_RESULT)
        )
        assert session.output_bytes_in_history == in_history
        assert session.output_bytes_received > 3 * session.output_bytes_in_history


def test_ingesting_twice_creates_no_new_blobs_or_items(
    recordings: Path, store, data_dir: Path
) -> None:
    out, _ = ingest(recordings)
    assert "3 of 3 files ingested" in out
    blobs, items = blob_files(data_dir), Item.objects.count()
    totals = list(Session.objects.values_list("output_bytes_received", "output_bytes_in_history"))

    out, _ = ingest(recordings)

    assert "0 new items" in out
    assert blob_files(data_dir) == blobs
    assert Item.objects.count() == items
    again = list(Session.objects.values_list("output_bytes_received", "output_bytes_in_history"))
    assert again == totals


def test_the_same_recording_under_another_name_is_the_same_session(
    recordings: Path, tmp_path: Path, store, data_dir: Path
) -> None:
    ingest(recordings / MINI_SWE_AGENT.name)
    copy = tmp_path / "renamed.txt"
    shutil.copyfile(MINI_SWE_AGENT, copy)
    ingest(copy)
    assert Session.objects.count() == 1


def test_a_damaged_recording_is_named_and_nothing_already_ingested_is_lost(
    recordings: Path, tmp_path: Path, store, data_dir: Path
) -> None:
    ingest(recordings / CLAUDE_CODE.name)
    items_before = Item.objects.count()
    lines = CLAUDE_CODE.read_text().splitlines()
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("\n".join([*lines[:10], "{oops", *lines[10:]]) + "\n")

    with pytest.raises(CommandError):
        ingest(damaged)

    assert Item.objects.count() == items_before


def test_the_damaged_line_is_reported_with_file_and_number(
    tmp_path: Path, store, data_dir: Path
) -> None:
    lines = CLAUDE_CODE.read_text().splitlines()
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("\n".join([*lines[:10], "{oops", *lines[10:]]) + "\n")
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("ingest", str(damaged), stdout=StringIO(), stderr=err)
    assert f"{damaged}:11:" in err.getvalue()
    assert Session.objects.count() == 0


def test_a_named_file_of_unknown_format_fails_but_a_folder_skips_it(
    recordings: Path, store, data_dir: Path
) -> None:
    stray = write_json(recordings / "settings.json", {"theme": "dark"})
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("ingest", str(stray), stdout=StringIO(), stderr=err)
    assert "unknown recording format" in err.getvalue()
    assert str(stray) in err.getvalue()

    out, _ = ingest(recordings)
    assert "skipped, not a recording" in out
    assert Session.objects.count() == 3


def test_a_folder_scan_passes_over_a_blob_store(recordings: Path, store, data_dir: Path) -> None:
    ingest(recordings)
    blobs = blob_files(data_dir)
    shutil.copytree(data_dir / "blobs", recordings / "blobs")
    out, _ = ingest(recordings)
    assert "not a recording" not in out
    assert blob_files(data_dir) == blobs


def test_our_own_log_with_a_whole_big_output_is_promoted_too(
    write_log, store, data_dir: Path
) -> None:
    big = json.dumps([{"name": f"pkg{i}", "version": "1.0"} for i in range(60)])
    path = write_log(
        [
            {"type": "session", "id": "0190f5e2-7c1a-7000-8000-000000000001", "title": "t"},
            {"type": "user", "seq": 1, "at": "2026-01-01T00:00:00+00:00", "text": "list"},
            {"type": "tool_result", "seq": 2, "call_id": "c", "tool": "pip", "output": big},
        ]
    )
    ingest(path)
    item = Item.objects.get(seq=2)
    assert item.output.startswith("[blob:") and "json_array | 60 entries" in item.output
    blob_id = BLOB_REF.match(item.output).group(1)
    assert store.load_sync(blob_id).value == json.loads(big)
    assert item.received_bytes == len(big)
