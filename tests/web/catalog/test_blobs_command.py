"""`manage.py blobs gc` removes what crashed writers leave behind (temporary files, and the
blobs a killed ingest journaled that no row references); `manage.py blobs index` adds rows
for blobs written straight into the store."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from blobviewer.catalog import blobs as catalog
from blobviewer.catalog import store_scan
from blobviewer.catalog.blobs import discard_derived, refresh_blob
from blobviewer.data_dir import renderings
from blobviewer.ingest.journal import IngestJournal, journal_folder
from blobviewer.models import Blob, SearchChunk, ShareLink
from blobviewer.search.queries import matching_chunks, parse_query
from blobviewer.team.uploads import received_upload
from core.content import Structured, Text
from core.store import TEMP_PREFIX, FsBlobStore
from core.store.blob_id import new_blob_id

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[3]
HOUR = 3600


def derived_files(blob_id: object) -> list[Path]:
    """The blob's files in `derived/` (file store): its rendering, that rendering's index."""
    root = renderings().root
    rendering = [path for path in (root / f"{blob_id}.txt",) if path.exists()]
    return rendering + sorted((root / ".index").glob(f"{blob_id}*"))


def blobs(*args: str) -> tuple[str, str]:
    """Run `manage.py blobs ARGS`; its stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    call_command("blobs", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def age(path: Path, seconds: float) -> Path:
    """Make *path* look last written *seconds* ago."""
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)
    return path


def temp_in(directory: Path, data: bytes = b"half written", **names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=directory, **{"prefix": TEMP_PREFIX, **names})
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    return Path(name)


def temporaries(directory: Path) -> list[Path]:
    return [path for path in directory.iterdir() if path.name.startswith(TEMP_PREFIX)]


def killed_mid_write(source: Path, store_dir: Path) -> Path:
    """Run `python -m core store` on *source*, SIGKILL it while its blob is being written,
    and return the temporary file it leaves. (The process may finish before it is seen
    writing; then it is run again.)"""
    for _ in range(10):
        process = subprocess.Popen(
            [sys.executable, "-m", "core", "store", "--dir", str(store_dir), str(source)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while process.poll() is None:
                writing = [e for e in os.scandir(store_dir) if e.name.startswith(TEMP_PREFIX)]
                try:
                    started = any(entry.stat().st_size for entry in writing)
                except FileNotFoundError:  # renamed into place just now
                    continue
                if started:
                    os.kill(process.pid, signal.SIGKILL)
                    break
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        if process.returncode == -signal.SIGKILL and (left := temporaries(store_dir)):
            return left[0]
    pytest.fail("python -m core store finished every time before it could be killed")


# --- gc ------------------------------------------------------------------------------------


def test_gc_removes_what_a_killed_core_store_left_and_keeps_real_and_fresh_files(
    data_dir, store, tmp_path
):
    kept = store.store_sync(Text("a real blob, stored long ago\n"))
    age(store.path_of(kept), 30 * 24 * HOUR)
    source = tmp_path / "big_output.txt"
    source.write_text(("x" * 99 + "\n") * 640_000)  # 64 MB: its write takes a while

    leftover = killed_mid_write(source, store.root)
    size = leftover.stat().st_size
    assert 0 < size < source.stat().st_size  # killed mid-write: a partial copy
    age(leftover, 2 * HOUR)
    fresh = temp_in(store.root)  # a write going on right now
    real_blobs = {path.name for path in store.root.iterdir()} - {leftover.name, fresh.name}

    out, _ = blobs("gc")

    assert not leftover.exists()
    assert fresh.exists()
    assert {path.name for path in store.root.iterdir()} == real_blobs | {fresh.name}
    assert store.load_sync(kept) == Text("a real blob, stored long ago\n")
    assert f"Removed 1 temporary file older than 1h from {data_dir}: " in out
    assert f"({size:,} bytes)" in out
    (line,) = [line for line in out.splitlines() if line.startswith("  blobs/")]
    assert line.startswith("  blobs/     1 file, ") and line.endswith(f"({size:,} bytes)")
    assert "Kept 1 younger temporary file: writes that may still be going on." in out


def test_gc_removes_the_part_file_of_an_upload_that_never_finished(data_dir, sample_log):
    log = sample_log.path.read_bytes()
    request = RequestFactory().post("/api/sessions", data=log, content_type="application/x-ndjson")
    sessions = data_dir / "sessions"

    # The process handling the upload dies while it is inside this block (kill -9 skips
    # the cleanup); here it is the gc that comes first.
    with received_upload(request, max_bytes=len(log)):
        (part,) = [path for path in sessions.iterdir() if path.name.endswith(".part")]
        assert part.name.startswith(".upload-")
        age(part, 2 * HOUR)
        age(sample_log.path, 2 * HOUR)

        out, _ = blobs("gc")

        assert not part.exists()
    assert sample_log.path.read_bytes() == log
    (line,) = [line for line in out.splitlines() if line.startswith("  sessions/")]
    assert line.startswith("  sessions/  1 file, ") and line.endswith(f"({len(log):,} bytes)")


def test_gc_removes_temporaries_in_derived_and_keeps_the_renderings(
    data_dir, json_blob, monkeypatch
):
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 100)
    blob_id = json_blob([{"n": n} for n in range(100)])
    refresh_blob(blob_id, store=FsBlobStore(data_dir / "blobs"))
    rendering, its_index = derived_files(blob_id)
    age(rendering, 2 * HOUR)
    age(its_index, 2 * HOUR)
    leftover = age(temp_in(renderings().root, b"x" * 1234), 2 * HOUR)

    out, _ = blobs("gc")

    assert not leftover.exists()
    assert rendering.exists() and its_index.exists()
    assert "  derived/   1 file, 1.2 KB (1,234 bytes)" in out


def test_gc_never_touches_blobs_logs_or_other_files_however_old(data_dir, sample_session, store):
    blobs("index")  # writes its marker beside the store
    old = [
        store.path_of(sample_session.text_blob),
        store.path_of(sample_session.json_blob),
        sample_session.path,
        store_scan.catalog_marker_path(),
        data_dir / "sessions" / "notes.part",
        data_dir / "sessions" / ".upload-no-suffix",
        store.root / "tmp-without-dot.txt",
        store.root / ".index-not-a-temporary",
    ]
    for path in old[4:]:
        path.write_bytes(b"someone else's")
    directory = store.root / ".tmp-a-folder"
    directory.mkdir()
    link = store.root / ".tmp-a-link"
    link.symlink_to(store.path_of(sample_session.text_blob))
    for path in [*old, directory, link]:
        age(path, 365 * 24 * HOUR)

    out, _ = blobs("gc", "--older-than", "1m")

    assert all(path.exists() for path in old)
    assert directory.is_dir() and link.is_symlink()
    assert "Removed 0 temporary files older than 1m" in out
    assert "(0 bytes)" in out


def test_gc_keeps_files_younger_than_older_than(data_dir, store):
    younger = age(temp_in(store.root), 20 * 60)
    older = age(temp_in(store.root), 40 * 60)

    out, _ = blobs("gc", "--older-than", "30m")

    assert younger.exists() and not older.exists()
    assert "older than 30m" in out
    assert "Kept 1 younger temporary file" in out


def test_gc_dry_run_reports_and_removes_nothing(data_dir, store):
    leftover = age(temp_in(store.root, b"x" * 10), 2 * HOUR)

    out, _ = blobs("gc", "--dry-run")

    assert leftover.exists()
    assert out.startswith("Would remove 1 temporary file older than 1h")
    assert "(10 bytes)" in out


def test_gc_reports_every_folder_and_the_total(data_dir, store):
    age(temp_in(store.root, b"x" * 100), 2 * HOUR)
    age(temp_in(store.root, b"x" * 50), 2 * HOUR)
    age(temp_in(data_dir, b"{}"), 2 * HOUR)  # a marker write that died

    out, _ = blobs("gc", "--older-than", "90m")

    assert out.splitlines() == [
        f"Removed 3 temporary files older than 90m from {data_dir}: 152 bytes (152 bytes)",
        "  blobs/     2 files, 150 bytes (150 bytes)",
        "  derived/   0 files",
        "  sessions/  0 files",
        "  ./         1 file, 2 bytes (2 bytes)",
    ]


def test_gc_on_an_empty_data_folder_removes_nothing(tmp_path, settings, db):
    settings.BLOBVIEWER_DATA = tmp_path / "nothing here yet"

    out, _ = blobs("gc")

    assert out.startswith("Removed 0 temporary files older than 1h")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("5x", "expected a number and a unit (s, m, h or d), e.g. 30m, 2h or 7d; got '5x'"),
        ("1 hour", "got '1 hour'"),
        ("-1h", "got '-1h'"),
        ("0m", "must be more than 0"),
    ],
)
def test_gc_refuses_an_age_it_cannot_read(data_dir, store, value, message):
    leftover = age(temp_in(store.root), 2 * HOUR)

    with pytest.raises(CommandError, match="--older-than") as raised:
        blobs("gc", f"--older-than={value}")

    assert message in str(raised.value)
    assert leftover.exists()


def test_gc_from_the_shell_refuses_a_bad_age_in_one_line_with_status_2(data_dir):
    result = subprocess.run(
        [sys.executable, "manage.py", "blobs", "gc", "--older-than", "soon"],
        cwd=REPO,
        env={**os.environ, "BLOBVIEWER_DATA": str(data_dir)},
        capture_output=True,
        text=True,
    )

    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "manage.py blobs gc: error: argument --older-than: expected a number and a unit "
        "(s, m, h or d), e.g. 30m, 2h or 7d; got 'soon'"
    )
    assert "Traceback" not in result.stderr


def test_blobs_without_an_action_says_which_there_are(data_dir):
    with pytest.raises(CommandError, match=r"\{gc,index,copy\}"):
        blobs()


# --- gc: what killed ingests wrote ------------------------------------------------------------


def journaled_blob(store: FsBlobStore, journal: IngestJournal, text: str) -> uuid.UUID:
    """A blob stored as ingest stores one: its id journaled first."""
    blob_id = new_blob_id()
    journal.record(blob_id)
    store.put_sync(blob_id, Text(text))
    return blob_id


def test_gc_removes_blobs_a_killed_ingest_wrote_that_no_row_references(
    data_dir, sample_session, store
):
    by_agent = store.store_sync(Text("an agent wrote this straight into the store\n"))
    killed = IngestJournal()
    orphan = journaled_blob(store, killed, "promoted by an ingest that was killed\n")
    killed.record(sample_session.text_blob)  # committed just before the kill
    killed.record(new_blob_id())  # killed before its blob was written
    killed.close()  # as the kill does: the file stays, its lock goes
    size = store.size_sync(orphan)

    out, _ = blobs("gc")

    assert not store.exists_sync(orphan)
    assert store.exists_sync(by_agent)
    assert store.exists_sync(sample_session.text_blob)
    assert store.exists_sync(sample_session.json_blob)
    assert not killed.path.exists()
    assert (
        f"Removed 1 blob that killed ingests wrote and no session references ({size:,} bytes)"
        in out.splitlines()
    )


def test_gc_removes_the_catalog_row_blobs_index_made_of_an_orphan(data_dir, store):
    killed = IngestJournal()
    orphan = journaled_blob(store, killed, "needle-in-an-orphan\n")
    killed.close()
    blobs("index")
    assert Blob.objects.filter(id=orphan).exists()
    assert SearchChunk.objects.filter(blob_id=orphan).exists()

    blobs("gc")

    assert not store.exists_sync(orphan)
    assert not Blob.objects.filter(id=orphan).exists()
    assert not SearchChunk.objects.filter(blob_id=orphan).exists()


def test_gc_removes_the_rendering_of_an_orphan(data_dir, store, monkeypatch):
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 100)
    killed = IngestJournal()
    orphan = new_blob_id()
    killed.record(orphan)
    store.put_sync(orphan, Structured([{"n": n} for n in range(100)]))
    killed.close()
    refresh_blob(orphan, store=store)  # as `blobs index` would, or the killed ingest did
    assert derived_files(orphan)

    blobs("gc")

    assert not store.exists_sync(orphan)
    assert derived_files(orphan) == []


def test_gc_keeps_a_journaled_blob_someone_shared(data_dir, store, django_user_model):
    killed = IngestJournal()
    shared = journaled_blob(store, killed, "listed by blobs index, then shared\n")
    killed.close()
    blobs("index")
    user = django_user_model.objects.create_user("carol")
    ShareLink.objects.create(blob_id=shared, created_by=user)

    out, _ = blobs("gc")

    assert store.exists_sync(shared)
    assert Blob.objects.filter(id=shared).exists()
    assert not killed.path.exists()
    assert "killed ingests" not in out


def test_gc_keeps_the_blobs_of_an_ingest_still_running(data_dir, store):
    running = IngestJournal()  # held open: its lock says its ingest is alive
    written = journaled_blob(store, running, "written, its transaction still open\n")

    out, _ = blobs("gc")

    assert store.exists_sync(written)
    assert running.path.exists()
    assert "Kept the journal of 1 ingest still running." in out
    running.remove()
    assert list(journal_folder().iterdir()) == []


def test_gc_dry_run_says_which_blobs_of_killed_ingests_would_go(data_dir, store):
    killed = IngestJournal()
    orphan = journaled_blob(store, killed, "x" * 100)
    killed.close()

    out, _ = blobs("gc", "--dry-run")

    assert store.exists_sync(orphan)
    assert killed.path.exists()
    assert (
        "Would remove 1 blob that killed ingests wrote and no session references (100 bytes)"
        in out.splitlines()
    )


def test_gc_settles_journals_whatever_their_age(data_dir, store):
    killed = IngestJournal()
    orphan = journaled_blob(store, killed, "killed a moment ago\n")
    killed.close()

    blobs("gc", "--older-than", "7d")

    assert not store.exists_sync(orphan)


# --- index ---------------------------------------------------------------------------------


def test_index_adds_rows_for_blobs_written_straight_into_the_store(data_dir, store):
    text = store.store_sync(Text("one\ntwo\nthree\n"))
    array = store.store_sync(Structured([1, 2, 3, 4]))
    obj = store.store_sync(Structured({"a": 1, "b": [2]}))

    out, _ = blobs("index")

    rows = Blob.objects.in_bulk()
    assert set(rows) == {text, array, obj}
    assert (rows[text].kind, rows[text].count, rows[text].size) == ("text", 3, 14)
    assert (rows[array].kind, rows[array].count) == ("json_array", 4)
    assert (rows[obj].kind, rows[obj].count) == ("json_object", 2)
    assert not any(row.missing for row in rows.values())
    assert out.startswith("3 blobs added to the index, 0 re-read")
    assert f"3 blobs in {store.root}" in out


def test_index_makes_blobs_written_straight_into_the_store_searchable(data_dir, store):
    # Search never reads blob files per request, so a blob that no ingest or upload
    # brought is only found once `blobs index` has read it into the search index.
    blob = store.store_sync(Text("prologue\nthe needle-in-a-haystack line\n"))
    assert not matching_chunks(parse_query("needle-in-a")).exists()

    out, _ = blobs("index")

    assert {chunk.blob_id for chunk in matching_chunks(parse_query("NEEDLE-in-a"))} == {blob}
    assert "1 made searchable" in out


def test_index_is_idempotent(data_dir, sample_session, store):
    store.store_sync(Text("lone\n"))
    blobs("index")
    before = {row.id: row.indexed_at for row in Blob.objects.all()}

    out, _ = blobs("index")

    assert {row.id: row.indexed_at for row in Blob.objects.all()} == before
    assert len(before) == 3
    assert out.startswith(
        "0 blobs added to the index, 0 re-read (were missing or unreadable), 0 now missing"
    )


def test_index_rereads_a_row_marked_missing_once_its_blob_is_in_the_store(data_dir, store):
    blob_id = uuid.UUID("01900000-0000-7000-8000-000000000031")
    Blob.objects.create(id=blob_id, missing=True)
    (store.root / f"{blob_id}.txt").write_text("arrived later\n")

    out, _ = blobs("index")

    row = Blob.objects.get(id=blob_id)
    assert not row.missing and row.kind == "text" and row.count == 1
    assert "0 blobs added to the index, 1 re-read" in out


def test_index_marks_rows_of_blobs_gone_from_the_store_missing(data_dir, sample_session, store):
    store.path_of(sample_session.text_blob).unlink()

    out, _ = blobs("index")

    row = Blob.objects.get(id=sample_session.text_blob)
    assert row.missing and row.size is None and row.count is None
    assert not Blob.objects.get(id=sample_session.json_blob).missing
    assert "1 now missing from the store" in out


def test_index_ignores_temporaries_and_files_that_are_not_blobs(data_dir, store):
    blob_id = store.store_sync(Text("real\n"))
    temp_in(store.root)
    (store.root / "notes.txt").write_text("not a blob")
    (store.root / f"{str(blob_id).upper()}.txt").write_text("not a canonical name")

    blobs("index")

    assert list(Blob.objects.values_list("id", flat=True)) == [blob_id]


def test_index_reports_progress_every_n_blobs(data_dir, store):
    for n in range(5):
        store.store_sync(Text(f"blob {n}\n"))

    out, err = blobs("index", "--progress-every", "2")

    assert err.splitlines() == [
        "indexed 2 of 5 blobs",
        "indexed 4 of 5 blobs",
        "indexed 5 of 5 blobs",
    ]
    assert out.startswith("5 blobs added")
    assert Blob.objects.count() == 5


def test_index_is_quiet_about_progress_on_a_small_store(data_dir, store):
    store.store_sync(Text("one\n"))

    _, err = blobs("index")

    assert err == ""


def test_index_refuses_a_progress_step_below_one(data_dir):
    with pytest.raises(CommandError, match="--progress-every"):
        blobs("index", "--progress-every", "0")


def test_index_of_a_store_that_does_not_exist_yet_adds_nothing(tmp_path, settings, db):
    settings.BLOBVIEWER_DATA = tmp_path / "fresh"

    out, _ = blobs("index")

    assert out.startswith("0 blobs added")
    assert not Blob.objects.exists()


def test_a_blobs_derived_files_can_be_found_and_discarded(data_dir, json_blob, monkeypatch):
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 100)
    blob_id = json_blob(list(range(100)))
    other = json_blob(list(range(200)))
    blobs("index")
    rendering, its_index = derived_files(blob_id)  # the rendering's line index (core.store.index)
    assert its_index.parent == rendering.parent / ".index"
    size = rendering.stat().st_size + its_index.stat().st_size

    assert discard_derived(blob_id) == size

    assert derived_files(blob_id) == [] and not rendering.exists() and not its_index.exists()
    assert len(derived_files(other)) == 2
    assert discard_derived(blob_id) == 0
