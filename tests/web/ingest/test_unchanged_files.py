"""A recording as its last ingest left it is not read again (blobviewer.ingest.unchanged):
a second `manage.py ingest` of the same files opens none of them, and any change that
could change what ingest records makes the file read again."""

from __future__ import annotations

import os
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from blobviewer.ingest import recording_files
from blobviewer.ingest.importers import codex
from blobviewer.ingest.unchanged import Seen, file_mark
from blobviewer.models import IngestedFile, Item, Session
from importers.recordings import CLAUDE_CODE, FIXTURES

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
