"""A recording as its last ingest left it is not read again (blobviewer.ingest.unchanged):
a second `manage.py ingest` of the same files opens none of them, and any change that
could change what ingest records makes the file read again."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from blobviewer.ingest import recording_files
from blobviewer.ingest.importers import codex
from blobviewer.ingest.importers.json_lines import (
    HEADER_BLOCK,
)
from blobviewer.ingest.marks import file_mark
from blobviewer.ingest.unchanged import Seen
from blobviewer.models import IngestedFile, Item, Session
from importers.recordings import CLAUDE_CODE, FIXTURES
from web.records import header, user_item

pytestmark = pytest.mark.django_db

RECORDINGS = [
    CLAUDE_CODE,
    FIXTURES / "codex" / "codex_golden.jsonl",
    FIXTURES / "gemini",
    FIXTURES / "django__django-12708.traj.json",
]


@pytest.fixture
def folder(tmp_path: Path, data_dir: Path) -> Path:
    """The recordings copied into a folder of their own, as an agent leaves them."""
    folder = tmp_path / "recordings"
    folder.mkdir()
    for source in RECORDINGS:
        if source.is_dir():
            shutil.copytree(source, folder / source.name)
        else:
            shutil.copy2(source, folder / source.name)
    (folder / "notes.json").write_text('{"not": "a recording"}')
    return folder


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths ingest opens as recordings, in order."""
    paths: list[Path] = []
    real = recording_files.open_recording

    def counting(path: Path, *args, **kwargs):
        paths.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(recording_files, "open_recording", counting)
    return paths


def ingest(*args: str) -> str:
    out = StringIO()
    call_command("ingest", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_a_second_ingest_of_unchanged_files_reads_none_of_them(folder, opened):
    first = ingest(str(folder))
    read_first = len(opened)
    assert read_first >= len(RECORDINGS) + 1  # the note that is no recording too
    sessions, items = Session.objects.count(), Item.objects.count()
    assert sessions >= len(RECORDINGS)

    opened.clear()
    again = ingest(str(folder))

    assert opened == []
    assert (Session.objects.count(), Item.objects.count()) == (sessions, items)
    summary = again.strip().splitlines()[-1]
    assert summary.startswith(f"{read_first} of {read_first} files ingested ")
    assert f"({read_first} unchanged, not read)" in summary
    assert ", 0 new items" in summary
    assert "new items" in first


def test_a_grown_touched_or_replaced_file_is_read_again(folder, opened):
    ingest(str(folder))
    codex_file = folder / "codex_golden.jsonl"
    claude_file = folder / CLAUDE_CODE.name
    traj = folder / "django__django-12708.traj.json"

    with codex_file.open("ab") as grown:  # an agent appends (a torn line for now)
        grown.write(b'{"timestamp": "2026-01-01T00:00:00Z"')
    status = claude_file.stat()  # touched: same bytes, a new time
    os.utime(claude_file, ns=(status.st_atime_ns, status.st_mtime_ns + 1_000_000_000))
    replaced = traj.with_suffix(".new")  # replaced by a copy: another inode, same bytes
    shutil.copy2(traj, replaced)
    replaced.replace(traj)

    opened.clear()
    ingest(str(folder))

    assert sorted(path.name for path in opened) == sorted(
        [codex_file.name, claude_file.name, traj.name]
    )


def test_a_file_whose_edges_changed_under_the_same_size_and_time_is_read_again(folder, opened):
    ingest(str(folder))
    notes = folder / "notes.json"
    status = notes.stat()
    notes.write_text('{"not": "a recordinG"}')  # same size
    os.utime(notes, ns=(status.st_atime_ns, status.st_mtime_ns))  # same time

    opened.clear()
    ingest(str(folder))

    assert [path.name for path in opened] == ["notes.json"]


def test_a_new_importer_version_or_other_options_read_every_file_again(folder, opened, monkeypatch):
    ingest(str(folder))
    opened.clear()
    ingest("--max-record", "64MB", str(folder))  # shapes what is stored: read again
    assert len(opened) == len(list(IngestedFile.objects.all()))

    opened.clear()
    monkeypatch.setattr(codex, "IMPORTER_VERSION", codex.IMPORTER_VERSION + 1)
    out = ingest("--max-record", "64MB", str(folder))
    assert len(opened) == IngestedFile.objects.count()
    assert "recorded by another importer version" in out


def test_a_deleted_session_or_a_forced_ingest_reads_its_file_again(folder, opened):
    ingest(str(folder))
    claude_file = folder / CLAUDE_CODE.name
    Session.objects.filter(source_path=str(claude_file)).delete()

    opened.clear()
    ingest(str(folder))
    assert [path.name for path in opened] == [claude_file.name]
    assert Session.objects.filter(source_path=str(claude_file)).exists()

    opened.clear()
    ingest("--force", str(folder))
    assert len(opened) == IngestedFile.objects.count()


def test_a_file_that_failed_is_read_again_next_time(tmp_path, data_dir, opened):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "session", "id": "not a uuid"}\n')
    with pytest.raises(Exception, match="could not be ingested"):
        ingest(str(broken))
    opened.clear()
    with pytest.raises(Exception, match="could not be ingested"):
        ingest(str(broken))
    assert opened == [broken]
    assert not IngestedFile.objects.exists()


def test_a_mark_is_taken_from_a_file_only(tmp_path, data_dir):
    path = tmp_path / "run.jsonl"
    path.write_text("{}\n")
    seen = Seen("shape")
    mark = file_mark(path)
    assert mark is not None and mark.size == 3
    seen.remember(path, mark)
    assert seen.unchanged(path, file_mark(path))
    assert not Seen("another shape").unchanged(path, file_mark(path))
    seen.forget(path)
    assert not seen.unchanged(path, mark)
    assert file_mark(tmp_path) is None  # a folder: its files change, not it
    os.mkfifo(tmp_path / "pipe.jsonl")
    assert file_mark(tmp_path / "pipe.jsonl") is None  # never opened: it would block


def test_a_file_whose_name_the_database_cannot_hold_is_read_every_time(folder, opened):
    odd = folder / os.fsdecode(b"odd-\xff.jsonl")  # not UTF-8: no mark can name it
    odd.write_text('{"not": "a recording"}\n')

    first = ingest(str(folder))
    opened.clear()
    again = ingest(str(folder))

    assert [path.name for path in opened] == [odd.name]
    assert Session.objects.filter(source_path=str(folder / CLAUDE_CODE.name)).exists()
    assert "files ingested" in first and "unchanged, not read" in again


def test_a_grown_session_log_is_read_from_where_its_last_ingest_ended(write_log, bytes_read):
    session_id = uuid.uuid4()
    filler = "x" * 10_000
    items = [user_item(n, f"message {n} {filler}") for n in range(1, 201)]
    path = write_log([header(session_id), *items])
    ingest(str(path))
    first_read = sum(bytes_read)
    assert first_read >= path.stat().st_size

    with path.open("a") as log:  # the agent goes on: two more items, then half a line
        for n in (201, 202):
            log.write(json.dumps(user_item(n, f"message {n}")) + "\n")
        log.write(json.dumps(user_item(203, "message 203"))[:20])
    grown = path.stat().st_size
    bytes_read.clear()
    ingest(str(path))

    read = sum(bytes_read)
    # The header line (in small blocks, twice: recognising, then reading) and the new lines.
    assert read < 4 * HEADER_BLOCK < first_read / 5
    seqs = list(Item.objects.filter(session_id=session_id).values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, 203))

    with path.open("a") as log:  # the torn line completed, one more
        log.write(json.dumps(user_item(203, "message 203"))[20:] + "\n")
        log.write(json.dumps(user_item(204, "message 204")) + "\n")
    bytes_read.clear()
    ingest(str(path))
    assert sum(bytes_read) < 4 * HEADER_BLOCK + (path.stat().st_size - grown)
    assert Item.objects.filter(session_id=session_id).count() == 204
    assert Session.objects.get(id=session_id).item_count == 204


def test_a_log_rewritten_before_where_it_was_read_is_read_whole(write_log, bytes_read):
    session_id = uuid.uuid4()
    path = write_log([header(session_id), user_item(1, "one " * 1000), user_item(2, "two")])
    ingest(str(path))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[1].replace(b"one", b"uno") + lines[2] + lines[2])
    bytes_read.clear()

    with pytest.raises(Exception, match="could not be ingested"):  # seq 1 now differs
        ingest(str(path))

    assert sum(bytes_read) >= path.stat().st_size  # read from the start, not resumed
