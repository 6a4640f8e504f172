"""Uploaded session logs on object storage (BLOBVIEWER_BLOBS=s3://…): kept as
`<prefix>/sessions/<id>.jsonl`, grown only by conditional writes over the version read, so
two hosts saving one log never lose a line (against SeaweedFS, tests/s3_server.py)."""

from __future__ import annotations

import random
import threading
import uuid
from pathlib import Path

import pytest
from django.test import Client

from blobviewer.catalog.session_logs import (
    LogCheck,
    LogDiverges,
    ObjectSessionLogs,
    file_blocks,
    session_logs,
)
from blobviewer.models import Blob, Session
from core.store import FsBlobStore
from core.store.s3 import S3Objects
from web.records import SampleSession, record_sample_session

pytestmark = pytest.mark.django_db

URL = "/api/sessions"
NDJSON = "application/x-ndjson"


@pytest.fixture
def blob_backend() -> str:
    return "s3"  # the site's store (tests/web/conftest.py) is the bucket here


@pytest.fixture
def agent_run(tmp_path: Path, data_dir: Path) -> SampleSession:
    agent = tmp_path / "agent"
    return record_sample_session(FsBlobStore(agent / "blobs"), agent / "sessions")


@pytest.fixture
def secret(api_token) -> str:
    return api_token[1]


@pytest.fixture
def objects(s3_site) -> S3Objects:
    """The site's `<prefix>/sessions/` objects, read straight from the bucket."""
    return S3Objects.from_url(f"{s3_site.url}/sessions")


def post_raw(client: Client, body: bytes, secret: str):
    return client.post(
        URL, data=body, content_type=NDJSON, headers={"Authorization": f"Bearer {secret}"}
    )


def post_with_blobs(client: Client, run: SampleSession, secret: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    blobs = sorted((run.path.parent.parent / "blobs").iterdir())
    data = {
        "log": SimpleUploadedFile("session.jsonl", run.path.read_bytes()),
        "blob": [SimpleUploadedFile(p.name, p.read_bytes()) for p in blobs if p.is_file()],
    }
    return client.post(URL, data=data, headers={"Authorization": f"Bearer {secret}"})


def lines_of(run: SampleSession) -> list[bytes]:
    return run.path.read_bytes().splitlines(keepends=True)


# --- uploads -------------------------------------------------------------------------------


def test_an_upload_keeps_its_log_and_blobs_in_the_bucket(
    client, secret, agent_run, store, objects, data_dir, s3_site
):
    response = post_with_blobs(client, agent_run, secret)

    assert response.status_code == 201, response.content
    kept = objects.get(f"{agent_run.id}.jsonl")
    assert kept is not None and kept.data == agent_run.path.read_bytes()
    # Nothing of it stays on this host's disk: another host sees the same.
    assert list((data_dir / "sessions").iterdir()) == []
    assert list((data_dir / "blobs").iterdir()) == []
    session = Session.objects.get(id=agent_run.id)
    assert session.source_path == f"{s3_site.url}/sessions/{agent_run.id}.jsonl"
    agent = FsBlobStore(agent_run.path.parent.parent / "blobs")
    assert store.load_sync(agent_run.text_blob) == agent.load_sync(agent_run.text_blob)
    assert not Blob.objects.get(id=agent_run.json_blob).missing


def test_a_grown_log_replaces_the_kept_one(client, secret, agent_run, objects):
    lines = lines_of(agent_run)
    assert post_raw(client, b"".join(lines[:4]), secret).status_code == 201

    response = post_raw(client, b"".join(lines), secret)

    assert response.status_code == 201
    assert (response.json()["new_items"], response.json()["items"]) == (6, 9)
    assert objects.get(f"{agent_run.id}.jsonl").data == b"".join(lines)


def test_an_older_shorter_copy_leaves_the_kept_log_as_it_is(client, secret, agent_run, objects):
    lines = lines_of(agent_run)
    post_raw(client, b"".join(lines), secret)
    etag = objects.head(f"{agent_run.id}.jsonl").etag

    response = post_raw(client, b"".join(lines[:3]), secret)

    assert response.status_code == 200
    assert objects.head(f"{agent_run.id}.jsonl").etag == etag
    assert Session.objects.get(id=agent_run.id).item_count == 9


def test_a_log_that_rewrites_a_recorded_line_is_refused_with_409(
    client, secret, agent_run, objects
):
    lines = lines_of(agent_run)
    post_raw(client, b"".join(lines[:5]), secret)
    assert b"Running the build" in lines[2]
    changed = lines[:2] + [lines[2].replace(b"Running", b"Skipping")] + lines[3:]

    response = post_raw(client, b"".join(changed), secret)

    assert response.status_code == 409
    assert response.content.decode().startswith("line 3: differs from session")
    assert objects.get(f"{agent_run.id}.jsonl").data == b"".join(lines[:5])
    assert Session.objects.get(id=agent_run.id).item_count == 4


# --- the conditional write ------------------------------------------------------------------


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


LOG = b"".join(b'{"line": %d}\n' % n for n in range(200))


def test_a_save_over_a_version_another_host_grew_keeps_the_longer_log(tmp_path, s3_site):
    logs = session_logs()
    assert isinstance(logs, ObjectSessionLogs)
    session_id = uuid.uuid4()
    logs.save(session_id, write(tmp_path / "a", LOG[:100]), LogCheck(True))
    mine = write(tmp_path / "mine", LOG[:500])
    check = logs.check(session_id, mine)
    assert check.replace and check.version
    # Meanwhile another host saves a longer log: the version checked is gone.
    theirs = write(tmp_path / "theirs", LOG[:1000])
    assert logs.save(session_id, theirs, logs.check(session_id, theirs))

    replaced = logs.save(session_id, mine, check)

    assert replaced is False  # 412, compared again: mine is a prefix of theirs
    assert b"".join(logs.open(session_id)) == LOG[:1000]


def test_a_save_over_a_version_another_host_rewrote_is_refused(tmp_path, s3_site):
    logs = session_logs()
    session_id = uuid.uuid4()
    logs.save(session_id, write(tmp_path / "a", LOG[:100]), LogCheck(True))
    mine = write(tmp_path / "mine", LOG[:500])
    check = logs.check(session_id, mine)
    other = LOG[:50] + b'{"line": "rewritten"}\n'
    logs.objects.put(f"{session_id}.jsonl", other)  # a writer that ignores the rule

    with pytest.raises(LogDiverges) as refused:
        logs.save(session_id, mine, check)

    assert refused.value.line == 5
    assert b"".join(logs.open(session_id)) == other


def test_a_first_save_does_not_clobber_a_log_another_host_made_meanwhile(tmp_path, s3_site):
    logs = session_logs()
    session_id = uuid.uuid4()
    mine = write(tmp_path / "mine", LOG[:300])
    check = logs.check(session_id, mine)
    assert check == LogCheck(True, "")
    logs.save(session_id, write(tmp_path / "theirs", LOG), LogCheck(True))

    assert logs.save(session_id, mine, check) is False
    assert b"".join(logs.open(session_id)) == LOG


def test_hosts_saving_copies_of_one_growing_log_never_shorten_it(tmp_path, s3_site):
    """Several hosts upload copies of one log as it grows, late and out of order (an
    agent's retries): whatever the interleaving, no save leaves the log shorter than the
    copy it saved, and the log ends as the longest copy sent."""
    logs = session_logs()
    session_id = uuid.uuid4()
    lines = LOG.splitlines(keepends=True)
    saved: list[tuple[int, int]] = []  # (bytes of the copy, bytes kept right after)
    errors: list[BaseException] = []

    def host(number: int) -> None:
        rng = random.Random(number)
        for round_ in range(12):
            copy = b"".join(lines[: rng.randint(1, len(lines))])
            path = write(tmp_path / f"host{number}-{round_}", copy)
            try:
                logs.save(session_id, path, logs.check(session_id, path))
                saved.append((len(copy), logs.size(session_id) or 0))
            except BaseException as error:
                errors.append(error)

    threads = [threading.Thread(target=host, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(saved) == 48
    assert all(kept >= copy for copy, kept in saved)
    longest = max(copy for copy, _ in saved)
    assert b"".join(logs.open(session_id)) == LOG[:longest]


def test_two_appenders_lose_no_lines(tmp_path, s3_site):
    """Two hosts append their own lines to one log at once, each reading the log, adding a
    line and saving it over the version read (told to read again when the other got there
    first): every line of both is in the log at the end, each once."""
    logs = session_logs()
    session_id = uuid.uuid4()
    logs.save(session_id, write(tmp_path / "start", b'{"type": "session"}\n'), LogCheck(True))
    retries = [0, 0]

    def appender(number: int) -> None:
        for n in range(15):
            line = b'{"host": %d, "n": %d}\n' % (number, n)
            while True:
                current = b"".join(logs.open(session_id))
                path = write(tmp_path / f"a{number}-{n}", current + line)
                try:
                    check = logs.check(session_id, path)
                    logs.save(session_id, path, check)
                    break
                except LogDiverges:  # the other appended first: read it again
                    retries[number] += 1

    threads = [threading.Thread(target=appender, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    kept = b"".join(logs.open(session_id)).splitlines()
    assert kept[0] == b'{"type": "session"}'
    assert sorted(kept[1:]) == sorted(
        b'{"host": %d, "n": %d}' % (host, n) for host in (0, 1) for n in range(15)
    )
    for host in (0, 1):  # each host's lines in its own order
        mine = [line for line in kept if line.startswith(b'{"host": %d' % host)]
        assert mine == [b'{"host": %d, "n": %d}' % (host, n) for n in range(15)]


def test_the_file_kind_compares_the_same_way(tmp_path, data_dir):
    logs = session_logs()
    session_id = uuid.uuid4()
    assert logs.save(session_id, write(tmp_path / "a", LOG[:100]), LogCheck(True))
    assert logs.check(session_id, write(tmp_path / "b", LOG)) == LogCheck(True)
    assert logs.check(session_id, write(tmp_path / "c", LOG[:60])) == LogCheck(False)
    with pytest.raises(LogDiverges):
        logs.check(session_id, write(tmp_path / "d", b"{}\n" + LOG))
    assert b"".join(logs.open(session_id)) == LOG[:100]
    assert [kept.session_id for kept in logs.kept()] == [session_id]
    assert b"".join(file_blocks(data_dir / "sessions" / f"{session_id}.jsonl")) == LOG[:100]


def test_an_upload_the_object_store_refuses_answers_503_naming_no_bucket(
    client, secret, agent_run, s3_site, settings
):
    settings.BLOBVIEWER_BLOBS = "s3://no-such-bucket-here/team"

    response = post_raw(client, agent_run.path.read_bytes(), secret)

    assert response.status_code == 503
    message = response.content.decode()
    assert message.startswith("the blob store failed; nothing was recorded, send it again later")
    assert "no-such-bucket-here" not in message
    assert not Session.objects.exists()
