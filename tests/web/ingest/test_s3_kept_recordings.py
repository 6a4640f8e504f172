"""`manage.py ingest` with the blobs on object storage keeps each session's recording in the
bucket (`<prefix>/sessions/<id>/<format>.recording`), so `ingest --rebuild --all` re-derives
a session on a host that does not have the file (docs/object-storage.md#kept-recordings)."""

from __future__ import annotations

import importlib
import shutil
import tarfile
import uuid
from datetime import timedelta
from io import BytesIO, StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from blobviewer.catalog.retention import prune
from blobviewer.catalog.session_logs import kept_recordings
from blobviewer.ingest.importers import claude_code, load_recording
from blobviewer.models import Item, Session
from core.store.s3 import S3Objects
from importers.recordings import CLAUDE_CODE, FIXTURES
from web.records import STORED_ITEM_FIELDS

pytestmark = pytest.mark.django_db

openhands = importlib.import_module("blobviewer.ingest.importers.openhands")
EVALUATION = FIXTURES / "openhands" / "multi_swe_bench_output.jsonl"
CONVERSATION = FIXTURES / "openhands" / "v1-conversation-cd94562403b9487ebdd4018e3f531dfd"


@pytest.fixture
def blob_backend() -> str:
    return "s3"


def ingest(*args: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ingest", *[str(a) for a in args], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def items(session_id: Any) -> list[dict[str, Any]]:
    return list(
        Item.objects.filter(session_id=session_id).order_by("seq").values(*STORED_ITEM_FIELDS)
    )


def sessions_folder(place: Any) -> S3Objects:
    return S3Objects.from_url(f"{place.url}/sessions")


def move_to_another_host(settings: Any, tmp_path: Path) -> None:
    """What a second server on the same database and bucket has: its own, empty, data
    folder, and none of the first host's recordings."""
    other = tmp_path / "other-host"
    (other / "sessions").mkdir(parents=True)
    settings.BLOBVIEWER_DATA = other


def make_outdated(monkeypatch: pytest.MonkeyPatch, module: Any, session_ids: list[Any]) -> None:
    """A new importer version, and the sessions' items spoilt in the database, so that
    only a re-derivation from the recording's bytes can bring them back."""
    monkeypatch.setattr(module, "IMPORTER_VERSION", module.IMPORTER_VERSION + 1)
    Item.objects.filter(session_id__in=session_ids).update(text="stale")


def test_ingest_keeps_the_recording_and_a_rebuild_on_another_host_rederives_it(
    tmp_path, store, s3_site, settings, monkeypatch
) -> None:
    recording = tmp_path / "host-a" / CLAUDE_CODE.name
    recording.parent.mkdir()
    shutil.copyfile(CLAUDE_CODE, recording)
    ingest(recording)
    session = Session.objects.get()
    before = items(session.id)
    assert len(before) > 10

    kept = sessions_folder(s3_site)
    name = f"{session.id}/claude_code.recording"
    assert kept.get(name).data == CLAUDE_CODE.read_bytes()
    assert kept.head(name).metadata["source-name"] == CLAUDE_CODE.name

    recording.unlink()
    move_to_another_host(settings, tmp_path)
    make_outdated(monkeypatch, claude_code, [session.id])

    out, err = ingest("--rebuild", "--all")

    assert err == ""
    assert f"{recording} is not on this host; re-derived from the copy kept at" in out
    assert f"{s3_site.url}/sessions/{name}" in out
    assert f"{recording}: rebuilt: {len(before)} items re-derived" in out
    rebuilt = Session.objects.get(id=session.id)
    assert rebuilt.importer_version == claude_code.IMPORTER_VERSION
    assert rebuilt.source_path == str(recording)  # still the path it was ingested from
    assert rebuilt.meta["source_name"] == CLAUDE_CODE.name
    assert items(session.id) == before
    assert not any((tmp_path / "other-host").rglob("*.jsonl"))  # fetched to a scratch folder


def test_each_run_of_an_evaluation_output_keeps_only_its_own_line(
    tmp_path, store, s3_site, settings, monkeypatch
) -> None:
    recording = tmp_path / EVALUATION.name
    shutil.copyfile(EVALUATION, recording)
    ingest(recording)
    sessions = list(Session.objects.order_by("id"))
    assert len(sessions) >= 2
    before = {session.id: items(session.id) for session in sessions}

    lines = [line + b"\n" for line in EVALUATION.read_bytes().split(b"\n") if line.strip()]
    kept = sessions_folder(s3_site)
    copies = {kept.get(f"{s.id}/openhands.recording").data for s in sessions}
    assert copies == set(lines)  # a line each, not the whole file each

    recording.unlink()
    move_to_another_host(settings, tmp_path)
    make_outdated(monkeypatch, openhands, list(before))

    out, err = ingest("--rebuild", "--all")

    assert err == ""
    for session in sessions:
        rebuilt = Session.objects.get(id=session.id)
        assert rebuilt.importer_version == openhands.IMPORTER_VERSION
        assert rebuilt.source_path == str(recording)
        assert items(session.id) == before[session.id]


def test_a_conversation_folder_is_kept_as_a_tar_and_rebuilt_from_it(
    tmp_path, store, s3_site, settings, monkeypatch
) -> None:
    folder = tmp_path / CONVERSATION.name
    shutil.copytree(CONVERSATION, folder)
    (folder / "events" / "secret").symlink_to("/etc/hostname")  # never followed
    ingest(folder)
    session = Session.objects.get()
    before = items(session.id)
    assert before

    kept = sessions_folder(s3_site)
    copy = kept.get(f"{session.id}/openhands.recording").data
    with tarfile.open(fileobj=BytesIO(copy)) as tar:
        names = tar.getnames()
        assert all(member.isfile() or member.isdir() for member in tar.getmembers())
    expected = {
        f"{folder.name}/{p.relative_to(CONVERSATION).as_posix()}" for p in CONVERSATION.rglob("*")
    }
    assert set(names) == {folder.name, *expected}

    shutil.rmtree(folder)
    move_to_another_host(settings, tmp_path)
    make_outdated(monkeypatch, openhands, [session.id])

    out, err = ingest("--rebuild", "--all")

    assert err == ""
    assert "re-derived from the copy kept at" in out
    rebuilt = Session.objects.get(id=session.id)
    assert rebuilt.importer_version == openhands.IMPORTER_VERSION
    assert rebuilt.source_path == str(folder)
    assert rebuilt.meta["source_name"] == folder.name
    assert items(session.id) == before


def test_an_unchanged_recording_is_not_written_again_and_an_older_copy_never_replaces_it(
    tmp_path, store, s3_site
) -> None:
    lines = CLAUDE_CODE.read_bytes().splitlines(keepends=True)
    recording = tmp_path / CLAUDE_CODE.name
    recording.write_bytes(b"".join(lines[: len(lines) // 2]))  # the run half way
    ingest(recording)
    session = Session.objects.get()
    kept = sessions_folder(s3_site)
    name = f"{session.id}/claude_code.recording"
    first = kept.head(name)

    ingest(recording)  # the same bytes: nothing written
    assert kept.head(name).etag == first.etag

    recording.write_bytes(b"".join(lines))  # the run went on: new items, a new copy
    ingest(recording)
    assert kept.get(name).data == CLAUDE_CODE.read_bytes()

    stale = tmp_path / "backup" / CLAUDE_CODE.name
    stale.parent.mkdir()
    stale.write_bytes(b"".join(lines[: len(lines) // 2]))  # adds nothing: kept copy stays
    out, _ = ingest(stale)
    assert "+0 items" in out
    assert kept.get(name).data == CLAUDE_CODE.read_bytes()


def test_a_rebuild_with_neither_the_file_nor_a_copy_says_the_recording_is_gone(
    tmp_path, store, s3_site, settings, monkeypatch
) -> None:
    recording = tmp_path / CLAUDE_CODE.name
    shutil.copyfile(CLAUDE_CODE, recording)
    ingest(recording)
    session = Session.objects.get()
    sessions_folder(s3_site).delete(f"{session.id}/claude_code.recording")
    recording.unlink()
    make_outdated(monkeypatch, claude_code, [session.id])

    out, err = ingest("--rebuild", "--all")

    assert err == ""
    assert f"its recording {recording} is gone; kept as it is" in out
    assert Item.objects.filter(session=session, text="stale").exists()


def test_an_uploaded_session_rebuilds_from_the_log_the_upload_kept(
    tmp_path, store, s3_site, settings, monkeypatch, api_token
) -> None:
    """Uploads keep their log at `<prefix>/sessions/<id>.jsonl` (the session's
    source_path): with no file on any host, that log is the recording to re-derive from."""
    detect = importlib.import_module("blobviewer.ingest.importers.detect")
    session_id = uuid.uuid4()
    log = (
        f'{{"type": "session", "id": "{session_id}", "created_at": "2026-01-01T00:00:00Z", '
        '"title": "uploaded", "model": "m", "meta": {}}\n'
        '{"type": "user", "seq": 1, "at": "2026-01-01T00:00:01Z", "text": "hello"}\n'
        '{"type": "assistant", "seq": 2, "at": "2026-01-01T00:00:02Z", "text": "hi there"}\n'
    )
    _, secret = api_token
    from django.test import Client

    response = Client().post(
        "/api/sessions",
        data=log.encode(),
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code in (200, 201), response.content
    before = items(session_id)
    assert [item["text"] for item in before] == ["hello", "hi there"]
    move_to_another_host(settings, tmp_path)
    monkeypatch.setattr(detect, "OUR_IMPORTER_VERSION", detect.OUR_IMPORTER_VERSION + 1)
    Item.objects.filter(session_id=session_id).update(text="stale")

    out, err = ingest("--rebuild", "--all")

    assert err == ""
    assert "re-derived from the copy kept at" in out
    assert items(session_id) == before
    assert (
        Session.objects.get(id=session_id).source_path
        == f"{s3_site.url}/sessions/{session_id}.jsonl"
    )


def test_the_file_store_keeps_no_copies(tmp_path, data_dir, settings) -> None:
    assert not settings.BLOBVIEWER_BLOBS
    recording = tmp_path / CLAUDE_CODE.name
    shutil.copyfile(CLAUDE_CODE, recording)
    ingest(recording)
    assert kept_recordings() is None
    assert list((data_dir / "sessions").iterdir()) == []
    assert load_recording(recording).header["id"] == str(Session.objects.get().id)


def test_prune_deletes_the_kept_recording_with_its_session(tmp_path, store, s3_site) -> None:
    recording = tmp_path / CLAUDE_CODE.name
    shutil.copyfile(CLAUDE_CODE, recording)
    ingest(recording)
    session = Session.objects.get()
    kept = sessions_folder(s3_site)
    size = CLAUDE_CODE.stat().st_size
    later = timezone.now() + timedelta(days=30)

    dry = prune(older_than=timedelta(days=1), now=later, dry_run=True)
    assert dry.log_bytes == size
    report = prune(older_than=timedelta(days=1), now=later)

    assert report.session_ids == (session.id,)
    assert report.log_bytes == size
    assert [info.name for info in kept.list()] == []


def test_a_copy_that_cannot_be_kept_fails_the_files_ingest_and_says_why(
    tmp_path, data_dir, s3_place, settings
) -> None:
    """A bucket that is not there: the session is recorded (nothing big to store), but
    the command says its copy was not kept and exits non-zero."""
    settings.BLOBVIEWER_BLOBS = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/team"
    chat = tmp_path / "chat.json"
    chat.write_text(
        '[{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]'
    )
    out, err = StringIO(), StringIO()

    with pytest.raises(CommandError) as failed:
        call_command("ingest", str(chat), stdout=out, stderr=err)

    assert failed.value.returncode == 1
    assert f"{chat}: ingested, but its copy could not be kept in the object store" in (
        err.getvalue()
    )
    assert "NoSuchBucket" in err.getvalue()
    assert Session.objects.count() == 1
