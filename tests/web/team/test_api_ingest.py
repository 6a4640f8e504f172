"""POST /api/sessions: agents on other machines send a session log and its blobs."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from blobviewer.ingest.errors import IngestError
from blobviewer.models import ApiToken, Blob, Item, Session
from core.content import Structured, Text
from core.store import FsBlobStore
from web.records import SampleSession, header, record_sample_session, tool_result_item, user_item

pytestmark = pytest.mark.django_db

URL = "/api/sessions"
NDJSON = "application/x-ndjson"


@pytest.fixture
def agent_run(tmp_path: Path, data_dir: Path) -> SampleSession:
    """A session recorded on another machine, with its own blob store (not the site's)."""
    agent = tmp_path / "agent"
    return record_sample_session(FsBlobStore(agent / "blobs"), agent / "sessions")


@pytest.fixture
def secret(api_token: tuple[ApiToken, str]) -> str:
    return api_token[1]


def auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def post_raw(client: Client, body: bytes, secret: str, *, content_type: str = NDJSON):
    return client.post(URL, data=body, content_type=content_type, headers=auth(secret))


def blob_file(path: Path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes())


def post_multipart(client: Client, log: bytes, secret: str, *, blobs=(), **fields):
    data = {"log": SimpleUploadedFile("session.jsonl", log), "blob": list(blobs), **fields}
    return client.post(URL, data=data, headers=auth(secret))


def agent_blobs(run: SampleSession) -> list[SimpleUploadedFile]:
    blobs = run.path.parent.parent / "blobs"
    return [blob_file(p) for p in sorted(blobs.iterdir())]


def files_in(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def assert_nothing_written(data_dir: Path) -> None:
    assert not Session.objects.exists()
    assert not Item.objects.exists()
    assert not Blob.objects.exists()
    assert list((data_dir / "sessions").iterdir()) == []
    assert list((data_dir / "blobs").iterdir()) == []


def lines_of(run: SampleSession) -> list[bytes]:
    return run.path.read_bytes().splitlines(keepends=True)


# --- a good upload -------------------------------------------------------------------------


def test_it_records_a_session_sent_with_its_blobs(client, secret, agent_run, store, data_dir):
    response = post_multipart(
        client, agent_run.path.read_bytes(), secret, blobs=agent_blobs(agent_run)
    )

    assert response.status_code == 201
    session_url = f"http://testserver{reverse('session_detail', args=[agent_run.id])}"
    assert response.json() == {
        "session": str(agent_run.id),
        "url": session_url,
        "new_items": 9,
        "items": 9,
        "blobs": 2,
        "missing_blobs": 0,
        "new_blobs": 2,
    }
    assert response["Location"] == session_url
    session = Session.objects.get(id=agent_run.id)
    assert session.title == "Fix the build"
    assert session.item_count == 9
    assert session.source_path == str(data_dir / "sessions" / f"{agent_run.id}.jsonl")
    # The log is saved as it was sent, and the blobs are in the site's store, loadable.
    saved = data_dir / "sessions" / f"{agent_run.id}.jsonl"
    assert saved.read_bytes() == agent_run.path.read_bytes()
    assert isinstance(store.load_sync(agent_run.text_blob), Text)
    assert isinstance(store.load_sync(agent_run.json_blob), Structured)
    agent_store = FsBlobStore(agent_run.path.parent.parent / "blobs")
    assert store.load_sync(agent_run.text_blob) == agent_store.load_sync(agent_run.text_blob)
    assert store.load_sync(agent_run.json_blob) == agent_store.load_sync(agent_run.json_blob)
    blobs = Blob.objects.filter(id__in=[agent_run.text_blob, agent_run.json_blob])
    assert [(b.kind, b.missing) for b in blobs.order_by("kind")] == [
        ("json_array", False),
        ("text", False),
    ]


def test_the_session_page_links_the_sent_blobs(client, secret, agent_run, user):
    post_multipart(client, agent_run.path.read_bytes(), secret, blobs=agent_blobs(agent_run))
    client.force_login(user)

    html = client.get(reverse("session_detail", args=[agent_run.id])).content.decode()

    blob_url = reverse("blob_detail", args=[agent_run.text_blob])
    assert f'href="{blob_url}"' in html
    assert "blob-ref missing" not in html
    assert client.get(blob_url).status_code == 200


@pytest.mark.parametrize("content_type", [NDJSON, "application/jsonl", "text/plain"])
def test_it_takes_a_bare_session_log_as_the_body(client, secret, agent_run, content_type):
    response = post_raw(client, agent_run.path.read_bytes(), secret, content_type=content_type)

    assert response.status_code == 201
    body = response.json()
    assert (body["new_items"], body["items"]) == (9, 9)
    # Its blobs stayed on the agent's machine.
    assert (body["blobs"], body["missing_blobs"], body["new_blobs"]) == (2, 2, 0)
    assert Blob.objects.get(id=agent_run.text_blob).missing


def test_the_same_upload_twice_changes_nothing(client, secret, agent_run, data_dir):
    log = agent_run.path.read_bytes()
    post_multipart(client, log, secret, blobs=agent_blobs(agent_run))
    before = (files_in(data_dir / "sessions"), files_in(data_dir / "blobs"))
    rows = (Session.objects.count(), Item.objects.count(), Blob.objects.count())

    response = post_multipart(client, log, secret, blobs=agent_blobs(agent_run))

    assert response.status_code == 200
    body = response.json()
    assert (body["new_items"], body["items"], body["new_blobs"]) == (0, 9, 0)
    assert (files_in(data_dir / "sessions"), files_in(data_dir / "blobs")) == before
    assert (Session.objects.count(), Item.objects.count(), Blob.objects.count()) == rows
    assert "Location" not in response


def test_a_grown_log_adds_only_its_new_items(client, secret, agent_run, data_dir):
    lines = lines_of(agent_run)
    post_raw(client, b"".join(lines[:4]), secret)

    response = post_raw(client, b"".join(lines), secret)

    assert response.status_code == 201
    assert (response.json()["new_items"], response.json()["items"]) == (6, 9)
    saved = data_dir / "sessions" / f"{agent_run.id}.jsonl"
    assert saved.read_bytes() == agent_run.path.read_bytes()


def test_an_older_shorter_copy_does_not_shorten_the_saved_log(client, secret, agent_run, data_dir):
    lines = lines_of(agent_run)
    post_raw(client, b"".join(lines), secret)

    response = post_raw(client, b"".join(lines[:3]), secret)

    assert response.status_code == 200
    saved = data_dir / "sessions" / f"{agent_run.id}.jsonl"
    assert saved.read_bytes() == agent_run.path.read_bytes()
    assert Session.objects.get(id=agent_run.id).item_count == 9


def test_blobs_sent_later_fill_in_the_missing_ones(client, secret, agent_run, store):
    log = agent_run.path.read_bytes()
    assert post_raw(client, log, secret).json()["missing_blobs"] == 2

    response = post_multipart(client, log, secret, blobs=agent_blobs(agent_run))

    assert response.status_code == 201  # no new items, but new blobs
    body = response.json()
    assert (body["new_items"], body["missing_blobs"], body["new_blobs"]) == (0, 0, 2)
    text = Blob.objects.get(id=agent_run.text_blob)
    assert (text.missing, text.kind, text.count) == (False, "text", 300)


def test_a_blob_already_stored_is_kept_as_it_is(client, secret, agent_run, store):
    stored = store.root / f"{agent_run.text_blob}.txt"
    stored.write_text("the site's copy\n")
    other = SimpleUploadedFile(stored.name, b"a different copy\n")

    response = post_multipart(client, agent_run.path.read_bytes(), secret, blobs=[other])

    assert response.status_code == 201
    assert response.json()["new_blobs"] == 0
    assert stored.read_text() == "the site's copy\n"


def test_it_records_when_the_token_was_last_used(client, api_token, agent_run):
    token, secret = api_token
    assert token.last_used_at is None

    post_raw(client, agent_run.path.read_bytes(), secret)

    token.refresh_from_db()
    assert token.last_used_at is not None
    assert (timezone.now() - token.last_used_at).total_seconds() < 60


def test_it_needs_neither_a_login_nor_a_csrf_token(secret, agent_run):
    client = Client(enforce_csrf_checks=True)

    response = post_raw(client, agent_run.path.read_bytes(), secret)

    assert response.status_code == 201


# --- who may send --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer "},
        {"Authorization": "Bearer bv_not-a-token-anyone-was-given"},
        {"Authorization": "Bearer not-even-our-format"},
        {"Authorization": "Basic YWxpY2U6cGFzc3dvcmQ="},
    ],
    ids=["no header", "empty", "unknown token", "foreign token", "basic auth"],
)
def test_it_refuses_a_request_without_a_valid_token(client, agent_run, data_dir, headers):
    response = client.post(
        URL, data=agent_run.path.read_bytes(), content_type=NDJSON, headers=headers
    )

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.endswith(b"\n") and response.content.count(b"\n") == 1
    assert b"token" in response.content
    assert_nothing_written(data_dir)


def test_it_refuses_a_revoked_token(client, api_token, agent_run, data_dir):
    token, secret = api_token
    token.revoke()

    response = post_raw(client, agent_run.path.read_bytes(), secret)

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"revoked" in response.content
    assert_nothing_written(data_dir)


def test_it_refuses_the_token_of_a_deactivated_user(client, api_token, user, agent_run):
    user.is_active = False
    user.save()

    response = post_raw(client, agent_run.path.read_bytes(), api_token[1])

    assert response.status_code == 401


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_it_only_takes_post(client, secret, method):
    response = getattr(client, method)(URL, headers=auth(secret))

    assert response.status_code == 405


# --- what it refuses, writing nothing ------------------------------------------------------


def test_a_truncated_body_is_refused_naming_its_last_line(client, secret, agent_run, data_dir):
    body = agent_run.path.read_bytes()

    response = post_raw(client, body[:-20], secret)  # cut inside line 10, the last

    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode().startswith("line 10: ")
    assert_nothing_written(data_dir)


def test_a_malformed_line_is_refused_by_its_number(client, secret, agent_run, data_dir):
    lines = lines_of(agent_run)
    lines[2] = b'{"type": "assistant", "seq": 2, oops}\n'

    response = post_multipart(client, b"".join(lines), secret, blobs=agent_blobs(agent_run))

    assert response.status_code == 400
    message = response.content.decode()
    assert message.startswith("line 3: not JSON: ")
    assert message.count("\n") == 1 and message.endswith("\n")
    assert str(data_dir) not in message
    assert_nothing_written(data_dir)


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([{"type": "user", "seq": 1, "text": "no header"}], "line 1: the first line must be"),
        ([header(id="not-a-uuid")], "line 1: session id: "),
        ([header(), user_item(1, "one"), {"type": "robot", "seq": 2}], "line 3: type must be"),
        ([header(), user_item(1, "one"), user_item(0, "zero")], "line 3: seq must be"),
        (
            [header(), user_item(1, "one"), user_item(2, "two"), user_item(1, "again")],
            "line 4: seq 1 appears more than once (first on line 2)",
        ),
    ],
    ids=["no header", "bad id", "bad type", "bad seq", "repeated seq"],
)
def test_a_damaged_log_is_refused_naming_the_line(client, secret, data_dir, records, expected):
    body = "".join(json.dumps(r) + "\n" for r in records).encode()

    response = post_raw(client, body, secret)

    assert response.status_code == 400
    assert response.content.decode().startswith(expected)
    assert_nothing_written(data_dir)


def test_an_empty_body_is_refused(client, secret, data_dir):
    response = post_raw(client, b"", secret)

    assert response.status_code == 400
    assert response.content.startswith(b"empty body")
    assert_nothing_written(data_dir)


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("notes.txt", b"hello", "blob file 'notes.txt': the name must be <uuid>.txt or"),
        (
            "01900000-0000-7000-8000-000000000001.bin",
            b"hello",
            "blob file '01900000-0000-7000-8000-000000000001.bin': the name must be",
        ),
        (
            "01900000-0000-7000-8000-000000000001.txt",
            b"caf\xe9 latin-1",
            "blob file '01900000-0000-7000-8000-000000000001.txt': not UTF-8 at byte 3",
        ),
        (
            "01900000-0000-7000-8000-000000000001.json",
            b'{"unclosed": [1, 2',
            "blob file '01900000-0000-7000-8000-000000000001.json': not JSON: ",
        ),
    ],
    ids=["not a uuid", "wrong suffix", "not utf-8", "broken json"],
)
def test_a_bad_blob_file_is_refused_by_name(
    client, secret, agent_run, data_dir, name, content, expected
):
    good = agent_blobs(agent_run)
    bad = SimpleUploadedFile(name, content)

    response = post_multipart(client, agent_run.path.read_bytes(), secret, blobs=[*good, bad])

    assert response.status_code == 400
    assert response.content.decode().startswith(expected)
    assert_nothing_written(data_dir)


def test_the_same_blob_twice_is_refused(client, secret, agent_run, data_dir):
    blobs = [*agent_blobs(agent_run), *agent_blobs(agent_run)]

    response = post_multipart(client, agent_run.path.read_bytes(), secret, blobs=blobs)

    assert response.status_code == 400
    assert b"is sent twice" in response.content
    assert_nothing_written(data_dir)


def test_a_multipart_upload_needs_its_log(client, secret, agent_run, data_dir):
    response = client.post(URL, data={"blob": agent_blobs(agent_run)}, headers=auth(secret))

    assert response.status_code == 400
    assert b'exactly one file "log"' in response.content
    assert_nothing_written(data_dir)


def test_a_multipart_upload_with_an_unknown_field_is_refused(client, secret, agent_run, data_dir):
    response = post_multipart(client, agent_run.path.read_bytes(), secret, blobs=[], blobs_typo="x")

    assert response.status_code == 400
    assert response.content.startswith(b"unexpected field 'blobs_typo'")
    assert_nothing_written(data_dir)


def test_an_unknown_content_type_is_refused(client, secret, agent_run, data_dir):
    response = post_raw(client, agent_run.path.read_bytes(), secret, content_type="image/png")

    assert response.status_code == 415
    assert b"application/x-ndjson" in response.content
    assert_nothing_written(data_dir)


def test_a_log_bigger_than_django_keeps_in_memory_is_taken(client, secret, data_dir, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    records = [header(), *(user_item(n, "x" * 100) for n in range(1, 51))]
    body = "".join(json.dumps(r) + "\n" for r in records).encode()
    assert len(body) > 5_000

    response = post_raw(client, body, secret)

    assert response.status_code == 201
    assert response.json()["items"] == 50


@pytest.mark.parametrize("form", ["raw", "multipart"])
def test_an_upload_over_the_limit_is_refused(client, secret, agent_run, data_dir, settings, form):
    settings.BLOBVIEWER_UPLOAD_MAX_BYTES = 1_000
    log = agent_run.path.read_bytes()
    assert len(log) > 1_000

    if form == "raw":
        response = post_raw(client, log, secret)
    else:
        response = post_multipart(client, log, secret, blobs=agent_blobs(agent_run))

    assert response.status_code == 413
    assert b"BLOBVIEWER_UPLOAD_MAX_BYTES" in response.content
    assert_nothing_written(data_dir)


def test_too_many_files_for_one_upload_are_refused(client, secret, agent_run, data_dir, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2

    response = post_multipart(
        client, agent_run.path.read_bytes(), secret, blobs=agent_blobs(agent_run)
    )

    assert response.status_code == 413
    assert response.content.startswith(b"more than 2 files in one upload")
    assert_nothing_written(data_dir)


def test_a_session_ingest_refuses_changes_nothing_in_the_database(
    client, secret, agent_run, data_dir, monkeypatch
):
    def refuse(*args, **kwargs):
        raise IngestError("server path", 4, "something ingest does not accept")

    monkeypatch.setattr("blobviewer.team.uploads.ingest_session", refuse)

    response = post_multipart(
        client, agent_run.path.read_bytes(), secret, blobs=agent_blobs(agent_run)
    )

    assert response.status_code == 400
    assert response.content == b"line 4: something ingest does not accept\n"
    assert not Session.objects.exists() and not Item.objects.exists()
    assert list((data_dir / "sessions").iterdir()) == []
    # The blobs it sent may stay: another upload may already rely on one of them.
    sent = {p.name for p in (agent_run.path.parent.parent / "blobs").iterdir()}
    assert {p.name for p in (data_dir / "blobs").iterdir()} <= sent


def test_a_failed_upload_never_removes_a_blob_a_recorded_session_uses(
    client, secret, agent_run, data_dir, monkeypatch
):
    # Whichever upload wrote a blob first, a failing one leaves uploaded blobs alone: a
    # concurrent upload that found them stored may have recorded its session meanwhile.
    blobs = agent_blobs(agent_run)
    response = post_multipart(client, agent_run.path.read_bytes(), secret, blobs=blobs)
    assert response.status_code == 201

    def refuse(*args, **kwargs):
        raise IngestError("server path", 2, "refused")

    monkeypatch.setattr("blobviewer.team.uploads.ingest_session", refuse)
    again = post_multipart(
        client, agent_run.path.read_bytes(), secret, blobs=agent_blobs(agent_run)
    )

    assert again.status_code == 400
    store = FsBlobStore(data_dir / "blobs")
    assert store.exists_sync(agent_run.text_blob) and store.exists_sync(agent_run.json_blob)


def test_blobs_ingest_promoted_are_discarded_when_the_upload_fails_afterwards(
    client, secret, data_dir, write_log, monkeypatch
):
    big = "".join(f"line {n} of an output the agent kept whole\n" for n in range(100))
    log = write_log([header(), tool_result_item(1, big)], name="elsewhere.jsonl")
    body = log.read_bytes()
    log.unlink()

    def broken_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("blobviewer.catalog.session_logs.FileSessionLogs.save", broken_disk)

    with pytest.raises(OSError):
        post_raw(client, body, secret)

    assert list((data_dir / "blobs").iterdir()) == []
    assert not Session.objects.exists()


def test_secrets_in_an_upload_are_redacted_before_the_log_or_a_blob_is_kept(
    client, secret, data_dir
):
    """An agent without redaction of its own sends a log and a blob holding secrets: the
    site keeps neither as sent, and the same log grown still continues the kept one."""
    token = "ghp_" + "a1B2" * 9
    session_id = uuid.uuid4()
    blob_id = "01a237f7-f0d4-74b4-96cb-c315ee808deb"
    lines = [
        header(session_id),
        user_item(1, f"push with {token}"),
        tool_result_item(2, f"[blob:{blob_id}] text | 2 lines"),
    ]
    log = "".join(json.dumps(line) + "\n" for line in lines).encode()
    blob = SimpleUploadedFile(f"{blob_id}.txt", f"DB_PASSWORD=hunter2hunter2\n{token}\n".encode())

    answer = post_multipart(client, log, secret, blobs=[blob])

    assert answer.status_code == 201, answer.content
    kept = (data_dir / "sessions" / f"{session_id}.jsonl").read_bytes()
    stored = FsBlobStore(data_dir / "blobs").load_sync(blob_id)
    for text in (kept.decode(), stored.text, Item.objects.get(seq=1).text):
        assert token not in text and "hunter2hunter2" not in text
    assert "[redacted:github_token]" in kept.decode() and "[redacted:named_secret]" in stored.text
    grown = log + (json.dumps(user_item(3, "and again")) + "\n").encode()
    assert post_raw(client, grown, secret).status_code == 201
    assert Session.objects.get(id=session_id).item_count == 3
