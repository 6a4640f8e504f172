"""POST /api/recordings: `blobviewer push` sends recordings of any format, as they are, a
grown one only its new bytes (docs/http-api.md#post-apirecordings)."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.core.management import call_command
from django.test import Client

from blobviewer.ingest.folder_tars import folder_tar
from blobviewer.ingest.importers.json_lines import HEADER_BLOCK
from blobviewer.ingest.marks import edges_digest
from blobviewer.models import ApiToken, Item, Session
from importers.recordings import CLAUDE_CODE, FIXTURES

pytestmark = pytest.mark.django_db

CODEX = (
    FIXTURES / "codex" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
)
CONVERSATION = FIXTURES / "openhands" / "v1-conversation-cd94562403b9487ebdd4018e3f531dfd"
KEY = "laptop:/home/ana/.claude/projects/demo/a7da6a22.jsonl"


@pytest.fixture
def secret(api_token: tuple[ApiToken, str]) -> str:
    return api_token[1]


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", password="not-alices-pw")


def digest(data: bytes) -> str:
    return edges_digest(io.BytesIO(data), len(data))


def push(
    client: Client,
    secret: str,
    data: bytes,
    *,
    offset: int = 0,
    sent: bytes = b"",
    name: str = CLAUDE_CODE.name,
    key: str = KEY,
    final: bool = True,
):
    """Push *data* from *offset*, the sender's bytes before it being *sent*."""
    query = {"key": key, "name": name, "offset": offset, "final": int(final)}
    if offset:
        query["prefix"] = digest(sent[:offset])
    return client.post(
        f"/api/recordings?{urlencode(query)}",
        data=data,
        content_type="application/octet-stream",
        headers={"Authorization": f"Bearer {secret}"},
    )


def test_a_pushed_recording_is_ingested_for_the_tokens_user(client, secret, user, data_dir):
    data = CLAUDE_CODE.read_bytes()

    answer = push(client, secret, data)

    assert answer.status_code == 201
    body = answer.json()
    assert body["offset"] == len(data) == int(answer["Blobviewer-Offset"])
    [made] = body["sessions"]
    session = Session.objects.get(id=made["session"])
    assert session.owner == user and session.source_format == "claude_code"
    assert made["items"] == session.item_count > 100 and made["new_items"] == made["items"]
    assert made["url"].endswith(f"/sessions/{session.id}/")
    assert push(client, secret, b"", offset=len(data), sent=data).status_code == 200


def test_a_grown_recording_sends_only_its_new_bytes(client, secret, data_dir, bytes_read):
    data = CODEX.read_bytes()
    lines = data.splitlines(keepends=True)
    first = b"".join(lines[: len(lines) // 2])
    assert push(client, secret, first, name=CODEX.name).status_code == 201
    items = Item.objects.count()
    bytes_read.clear()

    answer = push(client, secret, data[len(first) :], offset=len(first), sent=data, name=CODEX.name)

    assert answer.status_code == 201
    assert answer.json()["offset"] == len(data)
    [made] = answer.json()["sessions"]
    assert made["new_items"] == Item.objects.count() - items > 0
    # The server reads its copy from where its last ingest ended, not from the start.
    assert sum(bytes_read) <= 4 * HEADER_BLOCK + len(data) - len(first) < len(data)


def test_a_push_from_another_offset_is_answered_409_with_the_offset_held(client, secret, data_dir):
    data = CLAUDE_CODE.read_bytes()
    push(client, secret, data[:1000], final=False)

    ahead = push(client, secret, data[2000:], offset=2000, sent=data)
    behind = push(client, secret, data[500:], offset=500, sent=data)

    for answer in (ahead, behind):
        assert answer.status_code == 409
        assert answer["Blobviewer-Offset"] == "1000"
        assert (
            answer.content == b"the server holds 1,000 bytes of this recording: send from there\n"
        )
    changed = b"x" + data[1:]
    answer = push(client, secret, data[1000:], offset=1000, sent=changed)
    assert answer.status_code == 409 and answer["Blobviewer-Offset"] == "0"
    assert b"send it whole" in answer.content
    assert push(client, secret, data[1000:], offset=1000, sent=data).status_code == 201


def test_a_part_that_is_not_the_last_is_held_and_not_ingested(client, secret, data_dir):
    data = CLAUDE_CODE.read_bytes()
    middle = len(data) // 2

    answer = push(client, secret, data[:middle], final=False)

    assert answer.status_code == 202 and answer.json() == {
        "offset": middle,
        "sessions": [],
        "refused": [],
    }
    assert not Session.objects.exists()
    answer = push(client, secret, data[middle:], offset=middle, sent=data)
    assert answer.status_code == 201 and answer.json()["offset"] == len(data)


def test_another_users_session_is_refused_and_their_copy_left_as_it_was(
    client, secret, other_user, data_dir
):
    data = CLAUDE_CODE.read_bytes()
    theirs = ApiToken.objects.issue(user=other_user, name="their laptop")[1]
    assert push(client, theirs, data).status_code == 201

    answer = push(client, secret, data)

    assert answer.status_code == 403
    assert b"belongs to another user" in answer.content
    assert Session.objects.get().owner == other_user
    # Nothing held for the refused user: their next push starts from 0 again.
    again = push(client, secret, data[10:], offset=10, sent=data)
    assert again.status_code == 409 and again["Blobviewer-Offset"] == "0"


def test_a_session_ingested_on_the_server_without_an_owner_takes_no_push(
    client, secret, data_dir, tmp_path
):
    copy = tmp_path / CLAUDE_CODE.name
    copy.write_bytes(CLAUDE_CODE.read_bytes())
    call_command("ingest", str(copy), stdout=io.StringIO())

    answer = push(client, secret, CLAUDE_CODE.read_bytes())

    assert answer.status_code == 403
    assert Session.objects.get().owner is None


def test_a_file_that_is_no_recording_is_refused_and_not_held(client, secret, data_dir):
    answer = push(client, secret, b'{"not": "a recording"}\n', name="notes.json")

    assert answer.status_code == 422
    assert answer.content == b"not a recording in any format blobviewer reads\n"
    assert not list((data_dir / "pushed").rglob("notes.json"))


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"name": "a.jsonl"}, b"key: "),
        ({"key": "k", "name": "../a.jsonl"}, b"name: "),
        ({"key": "k", "name": ".hidden"}, b"name: "),
        ({"key": "k", "name": "a.jsonl", "offset": "-1"}, b"offset: "),
        ({"key": "k", "name": "a.jsonl", "offset": "5"}, b"prefix: "),
        ({"key": "k", "name": "a.jsonl", "final": "yes"}, b"final: "),
    ],
)
def test_bad_parameters_get_one_line_and_nothing_is_held(client, secret, data_dir, query, message):
    answer = client.post(
        f"/api/recordings?{urlencode(query)}",
        data=b"{}\n",
        content_type="application/octet-stream",
        headers={"Authorization": f"Bearer {secret}"},
    )

    assert answer.status_code == 400 and answer.content.startswith(message)
    assert answer.content.count(b"\n") == 1
    assert not (data_dir / "pushed").exists() or not list((data_dir / "pushed").rglob("*.jsonl"))


def test_a_push_without_a_token_or_over_the_limit_is_refused(client, secret, data_dir, settings):
    settings.BLOBVIEWER_UPLOAD_MAX_BYTES = 1000
    query = urlencode({"key": KEY, "name": "a.jsonl"})
    anonymous = client.post(f"/api/recordings?{query}", data=b"{}\n", content_type="text/plain")
    assert anonymous.status_code == 401

    answer = push(client, secret, CLAUDE_CODE.read_bytes())

    assert answer.status_code == 413 and b"send it in parts" in answer.content
    assert push(client, secret, CLAUDE_CODE.read_bytes()[:1000], final=False).status_code == 202


def test_the_copy_is_held_apart_for_each_user_and_key(client, secret, other_user, data_dir):
    data = CLAUDE_CODE.read_bytes()
    push(client, secret, data[:100], final=False)
    push(client, secret, data[:200], key="desktop:/same/file.jsonl", final=False)

    held = sorted(path.stat().st_size for path in (data_dir / "pushed").rglob("*.jsonl"))

    assert held == [100, 200]
    assert all(
        Path(path).name == CLAUDE_CODE.name for path in (data_dir / "pushed").rglob("*.jsonl")
    )


def test_a_folder_that_is_not_a_tar_of_itself_is_refused_and_nothing_is_held(
    client, secret, data_dir, tmp_path
):
    elsewhere = tmp_path / "other-name"
    shutil.copytree(CONVERSATION, elsewhere)
    answers = [
        post_folder(client, secret, b"not a tar at all"),
        post_folder(client, secret, folder_tar(elsewhere)),  # holds another folder
        post_folder(client, secret, folder_tar(CONVERSATION), offset=10),
    ]

    assert [answer.status_code for answer in answers] == [400, 400, 400]
    assert answers[0].content.startswith(b"not a tar of the folder")
    assert answers[1].content.startswith(b"not a tar of the folder: 'other-name'")
    assert answers[2].content.startswith(b"layout: ")
    assert not list((data_dir / "pushed").rglob("events"))
    assert post_folder(client, secret, folder_tar(CONVERSATION)).status_code == 201
    assert Session.objects.get().source_format == "openhands"


def post_folder(client: Client, secret: str, data: bytes, *, offset: int = 0):
    query = {"key": "laptop:/conv", "name": CONVERSATION.name, "layout": "folder"}
    if offset:
        query.update(offset=offset, prefix="x")
    return client.post(
        f"/api/recordings?{urlencode(query)}",
        data=data,
        content_type="application/x-tar",
        headers={"Authorization": f"Bearer {secret}"},
    )


def test_a_folder_tar_with_a_link_or_a_path_out_is_refused_before_anything_is_written(
    client, secret, data_dir, tmp_path
):
    for member in (
        tarfile.TarInfo(f"{CONVERSATION.name}/escape"),
        tarfile.TarInfo("../../outside.txt"),
    ):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            if member.name.endswith("escape"):
                member.type, member.linkname = tarfile.SYMTYPE, "/etc"
                tar.addfile(member)
            else:
                member.size = 5
                tar.addfile(member, io.BytesIO(b"owned"))

        answer = post_folder(client, secret, buffer.getvalue())

        assert answer.status_code == 400
        assert answer.content.startswith(b"not a tar of the folder")
    assert not (data_dir / "outside.txt").exists() and not (tmp_path / "outside.txt").exists()
    assert not any(path.is_symlink() for path in (data_dir / "pushed").rglob("*"))


def test_replace_at_offset_0_takes_the_place_of_the_copy_held(client, secret, data_dir):
    data = CLAUDE_CODE.read_bytes()
    push(client, secret, data[:1000], final=False)
    assert push(client, secret, data).status_code == 409  # not asked to replace

    query = urlencode({"key": KEY, "name": CLAUDE_CODE.name, "replace": 1})
    answer = client.post(
        f"/api/recordings?{query}",
        data=data,
        content_type="application/octet-stream",
        headers={"Authorization": f"Bearer {secret}"},
    )

    assert answer.status_code == 201 and answer.json()["offset"] == len(data)
