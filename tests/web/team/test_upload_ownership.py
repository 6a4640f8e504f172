"""Sessions belong to their senders: POST /api/sessions adds only to the token's user's
sessions, fills in only their missing blobs, and never shows a server path
(docs/http-api.md#who-may-add-to-a-session). Each test plays the attack, then checks that
nothing changed."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import connection
from django.forms import SplitDateTimeField
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from blobviewer.models import ApiToken, Blob, Item, Session
from core.store import FsBlobStore
from core.store.blob_id import new_blob_id
from core.store.errors import BlobIOError
from web.records import SampleSession, header, record_sample_session, tool_result_item, user_item

pytestmark = pytest.mark.django_db

URL = "/api/sessions"
NDJSON = "application/x-ndjson"


# --- two users, each with an agent ---------------------------------------------------------


@pytest.fixture
def alice(user: Any) -> Any:
    return user


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="another-horse-battery")


@pytest.fixture
def alice_secret(api_token: tuple[ApiToken, str]) -> str:
    return api_token[1]


@pytest.fixture
def bob_secret(bob: Any) -> str:
    return ApiToken.objects.issue(user=bob, name="bob's agent")[1]


@pytest.fixture
def alice_run(tmp_path: Path, data_dir: Path) -> SampleSession:
    """Alice's session, recorded on her machine with its own blob store."""
    agent = tmp_path / "alice-agent"
    return record_sample_session(FsBlobStore(agent / "blobs"), agent / "sessions")


def post_log(client: Client, body: bytes, secret: str):
    return client.post(
        URL, data=body, content_type=NDJSON, headers={"Authorization": f"Bearer {secret}"}
    )


def post_with_blobs(client: Client, body: bytes, secret: str, blobs: Iterable[tuple[str, bytes]]):
    data = {
        "log": SimpleUploadedFile("session.jsonl", body),
        "blob": [SimpleUploadedFile(name, content) for name, content in blobs],
    }
    return client.post(URL, data=data, headers={"Authorization": f"Bearer {secret}"})


def log_bytes(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def blob_files(run: SampleSession) -> list[tuple[str, bytes]]:
    store = run.path.parent.parent / "blobs"
    return [(path.name, path.read_bytes()) for path in sorted(store.iterdir())]


def lines_of(run: SampleSession) -> list[bytes]:
    return run.path.read_bytes().splitlines(keepends=True)


def disk(data_dir: Path) -> dict[str, str]:
    """Every file under the data directory (temporary ones included) and its SHA-256."""
    return {
        str(path.relative_to(data_dir)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(data_dir.rglob("*"))
        if path.is_file()
    }


def database() -> tuple[list[tuple[Any, ...]], ...]:
    sessions = Session.objects.order_by("id").values_list(
        "id", "title", "owner_id", "item_count", "blob_count"
    )
    items = Item.objects.order_by("session_id", "seq").values_list("session_id", "seq", "digest")
    blobs = Blob.objects.order_by("id").values_list("id", "missing", "size")
    return list(sessions), list(items), list(blobs)


def assert_refused(response, status: int, *, starts: str) -> str:
    assert response.status_code == status
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    message = response.content.decode()
    assert message.startswith(starts)
    assert message.endswith("\n") and message.count("\n") == 1
    return message


# --- a session belongs to whoever first recorded it -----------------------------------------


def test_the_first_token_to_record_a_session_makes_its_user_the_owner(
    client, alice, alice_secret, alice_run
):
    response = post_log(client, alice_run.path.read_bytes(), alice_secret)

    assert response.status_code == 201
    assert Session.objects.get(id=alice_run.id).owner == alice


def test_the_session_an_upload_claims_keeps_the_time_its_header_gives(
    client, alice_secret, data_dir
):
    session_id = uuid.uuid4()

    post_log(client, log_bytes([header(session_id), user_item(1, "hello")]), alice_secret)

    created = Session.objects.get(id=session_id).created_at
    assert created.isoformat() == "2025-05-01T12:00:00+00:00"


def test_it_refuses_a_takeover_of_another_users_session(
    client, alice, alice_secret, bob_secret, alice_run, data_dir
):
    post_with_blobs(client, alice_run.path.read_bytes(), alice_secret, blob_files(alice_run))
    saved = data_dir / "sessions" / f"{alice_run.id}.jsonl"
    log_before = saved.read_bytes()
    disk_before, database_before = disk(data_dir), database()
    # Bob sends alice's session id with seqs she has not used, a title of his, and a blob.
    foreign = new_blob_id()
    attack = log_bytes(
        [
            header(alice_run.id, title="taken over"),
            user_item(10, "ignore the above"),
            user_item(11, f"see [blob:{foreign}]"),
        ]
    )

    response = post_with_blobs(
        client, attack, bob_secret, [(f"{foreign}.txt", b"content of bob's choosing\n")]
    )

    message = assert_refused(response, 403, starts=f"session {alice_run.id} belongs to another")
    assert "owner" in message
    session = Session.objects.get(id=alice_run.id)
    assert (session.title, session.owner, session.item_count) == ("Fix the build", alice, 9)
    assert saved.read_bytes() == log_before  # byte for byte
    assert disk(data_dir) == disk_before  # no blob stored, no temporary file left
    assert database() == database_before


def test_it_refuses_another_user_even_the_owners_own_log(
    client, alice_secret, bob_secret, alice_run, data_dir
):
    post_log(client, alice_run.path.read_bytes(), alice_secret)
    before = (disk(data_dir), database())

    response = post_log(client, alice_run.path.read_bytes(), bob_secret)

    assert_refused(response, 403, starts=f"session {alice_run.id} belongs to another user")
    assert (disk(data_dir), database()) == before


def test_the_owner_still_appends_after_a_refused_takeover(
    client, alice, alice_secret, bob_secret, alice_run, data_dir
):
    lines = lines_of(alice_run)
    post_log(client, b"".join(lines[:6]), alice_secret)
    attack = log_bytes([header(alice_run.id, title="taken over"), user_item(20, "mine now")])
    assert post_log(client, attack, bob_secret).status_code == 403

    response = post_log(client, b"".join(lines), alice_secret)

    assert response.status_code == 201
    assert (response.json()["new_items"], response.json()["items"]) == (4, 9)
    saved = data_dir / "sessions" / f"{alice_run.id}.jsonl"
    assert saved.read_bytes() == alice_run.path.read_bytes()
    session = Session.objects.get(id=alice_run.id)
    assert (session.title, session.owner) == ("Fix the build", alice)
    assert not Item.objects.filter(session=session, seq=20).exists()
    # And the same upload again adds nothing.
    assert post_log(client, b"".join(lines), alice_secret).status_code == 200


def test_a_session_ingested_without_an_owner_takes_no_uploads(
    client, alice_secret, alice_run, data_dir
):
    lines = lines_of(alice_run)
    first_part = data_dir / "imports" / "run.jsonl"
    first_part.parent.mkdir()
    first_part.write_bytes(b"".join(lines[:5]))
    call_command("ingest", str(first_part), stdout=StringIO())
    assert Session.objects.get(id=alice_run.id).owner is None
    before = (disk(data_dir), database())

    response = post_log(client, b"".join(lines), alice_secret)

    message = assert_refused(response, 403, starts=f"session {alice_run.id} has no owner")
    assert "manage.py sessions chown" in message
    assert (disk(data_dir), database()) == before


def test_ingest_owner_gives_the_session_to_that_user_whose_token_may_then_append(
    client, alice, alice_secret, bob_secret, alice_run, data_dir
):
    lines = lines_of(alice_run)
    first_part = data_dir / "imports" / "run.jsonl"
    first_part.parent.mkdir()
    first_part.write_bytes(b"".join(lines[:5]))

    call_command("ingest", str(first_part), owner="alice", stdout=StringIO())

    assert Session.objects.get(id=alice_run.id).owner == alice
    assert post_log(client, b"".join(lines), bob_secret).status_code == 403
    response = post_log(client, b"".join(lines), alice_secret)
    assert response.status_code == 201
    assert (response.json()["new_items"], response.json()["items"]) == (5, 9)


def test_ingest_owner_refuses_an_unknown_user_and_ingests_nothing(alice_run):
    with pytest.raises(CommandError) as refused:
        call_command("ingest", str(alice_run.path), owner="mallory", stdout=StringIO())

    assert str(refused.value) == (
        "--owner: no user 'mallory': make one on /admin/ or with createsuperuser"
    )
    assert not Session.objects.exists()


def test_ingest_owner_gives_an_unowned_session_an_owner(alice, alice_run):
    call_command("ingest", str(alice_run.path), stdout=StringIO())
    assert Session.objects.get(id=alice_run.id).owner is None

    call_command("ingest", str(alice_run.path), owner="alice", stdout=StringIO())

    assert Session.objects.get(id=alice_run.id).owner == alice


def test_ingest_owner_refuses_a_session_that_belongs_to_someone_else(
    client, alice, bob, bob_secret, alice_run, data_dir
):
    lines = lines_of(alice_run)
    post_log(client, b"".join(lines[:5]), bob_secret)  # bob's token recorded it first
    err = StringIO()

    with pytest.raises(CommandError):
        call_command("ingest", str(alice_run.path), owner="alice", stdout=StringIO(), stderr=err)

    assert f"session {alice_run.id} belongs to another user" in err.getvalue()
    assert "its owner is bob" in err.getvalue()  # the CLI may say who
    session = Session.objects.get(id=alice_run.id)
    assert (session.owner, session.item_count) == (bob, 4)


def test_ingest_without_owner_keeps_the_owner_a_session_has(client, alice, alice_secret, alice_run):
    lines = lines_of(alice_run)
    post_log(client, b"".join(lines[:5]), alice_secret)

    call_command("ingest", str(alice_run.path), stdout=StringIO())

    session = Session.objects.get(id=alice_run.id)
    assert (session.owner, session.item_count) == (alice, 9)


# --- the log on disk only ever grows -------------------------------------------------------


def test_the_owner_cannot_rewrite_a_recorded_line_of_the_log(
    client, alice_secret, alice_run, data_dir
):
    lines = lines_of(alice_run)
    post_log(client, b"".join(lines[:5]), alice_secret)
    # Line 3 holds the same item, written differently: ingest alone would take it as
    # already recorded, but the file on disk would no longer be the one recorded.
    rewritten = (json.dumps(json.loads(lines[2]), indent=1).replace("\n", " ") + "\n").encode()
    assert rewritten != lines[2]
    before = (disk(data_dir), database())

    response = post_log(client, b"".join([*lines[:2], rewritten, *lines[3:]]), alice_secret)

    message = assert_refused(response, 409, starts="line 3: differs from session ")
    assert "may only add lines" in message
    assert (disk(data_dir), database()) == before


def test_the_owner_cannot_change_the_header_of_a_recorded_log(
    client, alice_secret, alice_run, data_dir
):
    lines = lines_of(alice_run)
    post_log(client, b"".join(lines), alice_secret)
    retitled = (json.dumps({**json.loads(lines[0]), "title": "another title"}) + "\n").encode()
    before = (disk(data_dir), database())

    response = post_log(client, b"".join([retitled, *lines[1:]]), alice_secret)

    assert_refused(response, 409, starts="line 1: differs from session ")
    assert (disk(data_dir), database()) == before
    assert Session.objects.get(id=alice_run.id).title == "Fix the build"


def test_a_long_log_is_compared_past_its_first_chunk(client, alice_secret, data_dir):
    session_id = uuid.uuid4()
    records = [header(session_id), *(user_item(n, f"{n} " + "x" * 500) for n in range(1, 301))]
    body = log_bytes(records)
    assert len(log_bytes(records[:201])) > 64 * 1024  # line 201 is past the first chunk
    assert post_log(client, log_bytes(records[:250]), alice_secret).status_code == 201
    saved = data_dir / "sessions" / f"{session_id}.jsonl"

    changed = [*records[:200], user_item(200, "not what was recorded"), *records[201:]]
    refused = post_log(client, log_bytes(changed), alice_secret)
    grown = post_log(client, body, alice_secret)

    assert_refused(refused, 409, starts="line 201: differs from session ")
    assert grown.status_code == 201
    assert grown.json()["new_items"] == 51
    assert saved.read_bytes() == body


# --- two first uploads of one new session at once --------------------------------------------


RACE = Path(__file__).parents[1] / "upload_race.py"


def database_for_other_processes(tmp_path: Path) -> str:
    """A DATABASE_URL other processes can use, holding what this test committed: the
    test database itself on PostgreSQL; on SQLite, whose test database lives in this
    process's memory, a copy of it in a file."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        copy = tmp_path / "race.sqlite3"
        connection.ensure_connection()
        target = sqlite3.connect(copy)
        connection.connection.backup(target)
        target.close()
        return f"sqlite:///{copy}"
    user, password = quote(settings["USER"] or ""), quote(settings["PASSWORD"] or "")
    credentials = f"{user}:{password}@" if password else f"{user}@" if user else ""
    host = f"{settings['HOST'] or 'localhost'}:{settings['PORT'] or 5432}"
    return f"postgres://{credentials}{host}/{settings['NAME']}"


def race(tmp_path: Path, env: dict[str, str], uploads: dict[str, tuple[str, bytes]]) -> dict:
    """Start one process per upload, let them all send at once, and return each one's
    printed answer."""
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    processes = {}
    for name, (secret, body) in uploads.items():
        log = folder / f"{name}.jsonl"
        log.write_bytes(body)
        command = [sys.executable, str(RACE), "send", secret, str(log)]
        command += [str(folder / f"{name}.ready"), str(folder / "start")]
        processes[name] = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    while not all((folder / f"{name}.ready").exists() for name in uploads):
        assert all(process.poll() is None for process in processes.values()), "a sender died"
        time.sleep(0.01)
    (folder / "start").touch()
    answers = {}
    for name, process in processes.items():
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err  # a traceback here would be a 500
        answers[name] = out
    return answers


@pytest.mark.django_db(transaction=True)
def test_two_users_first_uploads_of_one_new_session_at_once_make_exactly_one_owner(
    alice, bob, alice_secret, bob_secret, data_dir, tmp_path
):
    # The claim is an INSERT that does nothing on conflict, then a locking read (see
    # session_ownership.claim_session): whichever insert the database takes first owns
    # the session, the other upload waits for it and then reads that owner.
    env = {
        **os.environ,
        "DATABASE_URL": database_for_other_processes(tmp_path),
        "BLOBVIEWER_DATA": str(data_dir),
        "DEBUG": "true",
    }
    for _ in range(3):
        session_id = uuid.uuid4()
        logs = {
            name: log_bytes([header(session_id, title=f"{name}'s run"), user_item(1, name)])
            for name in ("alice", "bob")
        }

        answers = race(
            tmp_path,
            env,
            {"alice": (alice_secret, logs["alice"]), "bob": (bob_secret, logs["bob"])},
        )

        statuses = {name: int(answer.split()[0]) for name, answer in answers.items()}
        assert sorted(statuses.values()) == [201, 403], answers
        winner = next(name for name, status in statuses.items() if status == 201)
        loser = next(name for name in statuses if name != winner)
        assert f"session {session_id} belongs to another user" in answers[loser]
        inspected = subprocess.run(
            [sys.executable, str(RACE), "inspect", str(session_id)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(inspected.stdout) == {
            "owner": winner,
            "title": f"{winner}'s run",
            "texts": [winner],
        }
        saved = data_dir / "sessions" / f"{session_id}.jsonl"
        assert saved.read_bytes() == logs[winner]
    assert not list((data_dir / "sessions").glob(".upload-*"))


# --- a missing blob is filled in only by an owner of a session that lacks it ----------------


def test_a_token_cannot_fill_in_another_users_missing_blob(
    client, alice_secret, bob_secret, alice_run, data_dir
):
    post_log(client, alice_run.path.read_bytes(), alice_secret)  # its blobs stay missing
    before = (disk(data_dir), database())
    bobs_log = log_bytes([header(title="bob's own run"), user_item(1, "hello")])
    forged = [(f"{alice_run.text_blob}.txt", b"content of bob's choosing\n")]

    response = post_with_blobs(client, bobs_log, bob_secret, forged)

    message = assert_refused(response, 403, starts=f"blob {alice_run.text_blob}: missing from")
    assert "only the owner of the session that referenced it first" in message
    assert (disk(data_dir), database()) == before
    assert Blob.objects.get(id=alice_run.text_blob).missing


def test_referencing_the_blob_in_ones_own_log_does_not_open_it(
    client, alice_secret, bob_secret, alice_run, data_dir
):
    post_log(client, alice_run.path.read_bytes(), alice_secret)
    before = (disk(data_dir), database())
    bobs_log = log_bytes([header(), user_item(1, f"look: [blob:{alice_run.json_blob}]")])
    forged = [
        (f"{alice_run.json_blob}.json", b'["content of bob\'s choosing"]'),
        (f"{alice_run.text_blob}.txt", b"and this one too\n"),
    ]

    response = post_with_blobs(client, bobs_log, bob_secret, forged)

    first = min(str(alice_run.json_blob), str(alice_run.text_blob))
    assert_refused(response, 403, starts=f"blob {first} (and 1 more): missing from")
    assert (disk(data_dir), database()) == before


def test_a_session_made_to_mention_the_blob_gives_no_right_to_fill_it(
    client, alice_secret, bob_secret, alice_run, data_dir, store
):
    # 1. Alice's run arrives without its JSON blob: the store lacks it.
    alices_log = alice_run.path.read_bytes()
    text_only = [blob for blob in blob_files(alice_run) if blob[0].endswith(".txt")]
    first = post_with_blobs(client, alices_log, alice_secret, text_only)
    assert (first.status_code, first.json()["missing_blobs"]) == (201, 1)
    wanted = alice_run.json_blob
    # 2. Bob records a run of his own whose one line mentions that blob...
    bobs_log = log_bytes([header(title="bob's run"), user_item(1, f"see [blob:{wanted}]")])
    assert post_log(client, bobs_log, bob_secret).status_code == 201
    before = (disk(data_dir), database())

    # 3. ...and sends the same log again with the blob's content of his choosing.
    forged = [(f"{wanted}.json", b'{"content": "of bob\'s choosing"}')]
    response = post_with_blobs(client, bobs_log, bob_secret, forged)

    assert response.content.decode() == (
        f"blob {wanted}: missing from a session that is not yours; only the owner of the "
        "session that referenced it first may send it\n"
    )
    assert response.status_code == 403
    assert not store.exists_sync(wanted)
    assert (disk(data_dir), database()) == before
    assert Blob.objects.get(id=wanted).missing
    # Alice still sends it, with her own session's log, and the content is her agent's.
    response = post_with_blobs(client, alices_log, alice_secret, blob_files(alice_run))
    assert response.status_code == 201
    assert (response.json()["new_blobs"], response.json()["missing_blobs"]) == (1, 0)
    agent_store = FsBlobStore(alice_run.path.parent.parent / "blobs")
    assert store.load_sync(wanted) == agent_store.load_sync(wanted)
    assert not Blob.objects.get(id=wanted).missing


def test_mentioning_a_blob_first_does_not_take_it_from_its_maker_after_a_rebuild(
    client, alice_secret, bob_secret, alice_run, store
):
    # Which reference came first is the referencing item's pk, which a rebuild keeps.
    alices_log = alice_run.path.read_bytes()
    post_log(client, alices_log, alice_secret)
    bobs_log = log_bytes([header(), user_item(1, f"see [blob:{alice_run.text_blob}]")])
    post_log(client, bobs_log, bob_secret)
    session = Session.objects.get(id=alice_run.id)
    call_command("ingest", session.source_path, "--rebuild", stdout=StringIO())

    forged = [(f"{alice_run.text_blob}.txt", b"forged\n")]
    assert post_with_blobs(client, bobs_log, bob_secret, forged).status_code == 403
    response = post_with_blobs(client, alices_log, alice_secret, blob_files(alice_run))
    assert response.status_code == 201
    assert store.load_sync(alice_run.text_blob).text != "forged\n"


def test_the_owner_fills_in_their_missing_blobs(client, alice_secret, bob_secret, alice_run, store):
    log = alice_run.path.read_bytes()
    post_log(client, log, alice_secret)
    bobs_log = log_bytes([header(), user_item(1, "hello")])
    post_with_blobs(client, bobs_log, bob_secret, [(f"{alice_run.text_blob}.txt", b"forged\n")])

    response = post_with_blobs(client, log, alice_secret, blob_files(alice_run))

    assert response.status_code == 201
    assert (response.json()["new_blobs"], response.json()["missing_blobs"]) == (2, 0)
    agent_store = FsBlobStore(alice_run.path.parent.parent / "blobs")
    assert store.load_sync(alice_run.text_blob) == agent_store.load_sync(alice_run.text_blob)


def test_a_blob_no_session_references_is_open_to_any_token(client, alice_secret, bob_secret, store):
    early = new_blob_id()
    bobs_log = log_bytes([header(), user_item(1, "blobs first, the log later")])

    response = post_with_blobs(client, bobs_log, bob_secret, [(f"{early}.txt", b"sent early\n")])

    assert response.status_code == 201
    assert response.json()["new_blobs"] == 1
    assert store.load_sync(early).text == "sent early\n"


def test_a_blob_missing_from_a_session_nobody_owns_is_refused(
    client, alice_secret, alice_run, data_dir
):
    call_command("ingest", str(alice_run.path), stdout=StringIO())  # no owner
    before = (disk(data_dir), database())
    alices_log = log_bytes([header(), user_item(1, "a run of hers")])

    response = post_with_blobs(client, alices_log, alice_secret, blob_files(alice_run)[:1])

    assert_refused(response, 403, starts="blob ")
    assert (disk(data_dir), database()) == before


def test_a_stored_blob_sent_again_by_another_user_is_kept_as_it_is(
    client, alice_secret, bob_secret, alice_run, store
):
    post_with_blobs(client, alice_run.path.read_bytes(), alice_secret, blob_files(alice_run))
    stored = store.load_sync(alice_run.text_blob)
    bobs_log = log_bytes([header(), user_item(1, "hello")])

    response = post_with_blobs(
        client, bobs_log, bob_secret, [(f"{alice_run.text_blob}.txt", b"forged\n")]
    )

    assert response.status_code == 201  # bob's own session; the blob was no fill
    assert response.json()["new_blobs"] == 0
    assert store.load_sync(alice_run.text_blob) == stored


# --- no response names a path on the server -------------------------------------------------


def claude_code_line(session_id: uuid.UUID) -> bytes:
    line = {
        "type": "user",
        "sessionId": str(session_id),
        "timestamp": "2025-11-29T15:16:58.435Z",
        "message": {"role": "user", "content": "a claude code run"},
    }
    return (json.dumps(line) + "\n").encode()


def test_no_response_to_a_conflicting_upload_names_a_server_path(
    client, alice_secret, bob_secret, alice_run, data_dir, monkeypatch
):
    imports = data_dir / "imports"
    imports.mkdir()
    # A blobviewer log and a Claude Code recording, ingested at the command line for alice.
    ours_id, theirs_id = uuid.uuid4(), uuid.uuid4()
    (imports / "ours.jsonl").write_bytes(log_bytes([header(ours_id), user_item(1, "recorded")]))
    (imports / "claude.jsonl").write_bytes(claude_code_line(theirs_id))
    call_command("ingest", str(imports), owner="alice", stdout=StringIO())
    post_log(client, alice_run.path.read_bytes(), alice_secret)
    lines = lines_of(alice_run)

    answers = {
        "another run with the same id": post_log(
            client,
            log_bytes([header(ours_id), user_item(1, "not what was recorded")]),
            alice_secret,
        ),
        "another format": post_log(
            client, log_bytes([header(theirs_id), user_item(1, "hi")]), alice_secret
        ),
        "a takeover": post_log(client, alice_run.path.read_bytes(), bob_secret),
        "a rewrite": post_log(client, b"".join([lines[0], lines[2]]), alice_secret),
    }
    full_output = "".join(f"line {n} of an output the agent kept whole\n" for n in range(100))

    def full_disk(*args: object, **kwargs: object) -> None:
        raise BlobIOError(f"cannot write to {data_dir / 'blobs'}: No space left on device")

    monkeypatch.setattr("core.store.fs.FsBlobStore.put_sync", full_disk)
    answers["a full disk"] = post_log(
        client, log_bytes([header(), tool_result_item(1, full_output)]), alice_secret
    )

    assert {name: answer.status_code for name, answer in answers.items()} == {
        "another run with the same id": 400,
        "another format": 400,
        "a takeover": 403,
        "a rewrite": 409,
        "a full disk": 400,
    }
    assert (
        "is this another run with the same id?"
        in answers["another run with the same id"].content.decode()
    )
    assert (
        "already recorded from a claude_code recording"
        in answers["another format"].content.decode()
    )
    assert answers["a full disk"].content == b"seq 1: the blob store cannot store its output\n"
    for name, answer in answers.items():
        body = answer.content.decode()
        for path in {str(data_dir), str(data_dir.resolve()), str(imports)}:
            assert path not in body, name


def test_the_command_line_still_says_where_a_session_was_recorded_from(alice, data_dir):
    imports = data_dir / "imports"
    imports.mkdir()
    session_id = uuid.uuid4()
    first = imports / "first.jsonl"
    first.write_bytes(log_bytes([header(session_id), user_item(1, "recorded")]))
    second = imports / "second.jsonl"
    second.write_bytes(log_bytes([header(session_id), user_item(1, "another run")]))
    call_command("ingest", str(first), stdout=StringIO())
    err = StringIO()

    with pytest.raises(CommandError):
        call_command("ingest", str(second), stdout=StringIO(), stderr=err)

    assert err.getvalue().startswith(f"{second}: seq 1 differs from session {session_id}")
    assert f"(recorded from {first})" in err.getvalue()


# --- the admin sets and shows the owner -----------------------------------------------------


def test_the_admin_lists_owners_and_gives_a_session_one(
    admin_client, client, alice, alice_secret, alice_run
):
    call_command("ingest", str(alice_run.path), stdout=StringIO())  # no owner
    url = reverse("admin:blobviewer_session_change", args=[alice_run.id])
    form = admin_client.get(url).context["adminform"].form
    data = {}
    for field in form:
        value = field.value()
        if isinstance(field.field, SplitDateTimeField):
            moment = timezone.localtime(value) if value else None
            data[f"{field.name}_0"] = moment.date().isoformat() if moment else ""
            data[f"{field.name}_1"] = moment.time().isoformat() if moment else ""
        else:
            data[field.name] = "" if value is None else value
    data["owner"] = str(alice.pk)  # a raw id field: the user's primary key

    response = admin_client.post(url, data)

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Session.objects.get(id=alice_run.id).owner == alice
    changelist = admin_client.get(reverse("admin:blobviewer_session_changelist"))
    assert '<td class="field-owner nowrap">alice</td>' in changelist.content.decode()
    assert post_log(client, alice_run.path.read_bytes(), alice_secret).status_code == 200
