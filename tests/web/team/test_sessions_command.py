"""`manage.py sessions chown SESSION_ID USER`: give a recorded session an owner, whose API
tokens may then add to it."""

from __future__ import annotations

import uuid
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from blobviewer.models import ApiToken, Session
from core.store import FsBlobStore
from web.records import SampleSession, record_sample_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="another-horse-battery")


@pytest.fixture
def agent_run(tmp_path: Path, data_dir: Path) -> SampleSession:
    agent = tmp_path / "agent"
    return record_sample_session(FsBlobStore(agent / "blobs"), agent / "sessions")


@pytest.fixture
def unowned(agent_run: SampleSession) -> Session:
    """The first five lines of the run, ingested at the command line without an owner."""
    first_part = agent_run.path.with_name("first-part.jsonl")
    first_part.write_bytes(b"".join(agent_run.path.read_bytes().splitlines(keepends=True)[:5]))
    call_command("ingest", str(first_part), stdout=StringIO())
    return Session.objects.get(id=agent_run.id)


def chown(*arguments: str) -> str:
    out = StringIO()
    call_command("sessions", "chown", *arguments, stdout=out)
    return out.getvalue()


def upload(log: bytes, secret: str):
    return Client().post(
        "/api/sessions",
        data=log,
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {secret}"},
    )


def test_chown_gives_an_unowned_session_to_a_user_whose_token_may_then_append(
    unowned, agent_run, user
):
    secret = ApiToken.objects.issue(user=user, name="agent")[1]
    assert upload(agent_run.path.read_bytes(), secret).status_code == 403

    out = chown(str(unowned.id), "alice")

    assert out == f"session {unowned.id} 'Fix the build' now belongs to alice (was nobody)\n"
    assert Session.objects.get(id=unowned.id).owner == user
    response = upload(agent_run.path.read_bytes(), secret)
    assert response.status_code == 201
    assert (response.json()["new_items"], response.json()["items"]) == (5, 9)


def test_chown_moves_a_session_from_one_owner_to_another(unowned, agent_run, user, bob):
    chown(str(unowned.id), "alice")
    alices = ApiToken.objects.issue(user=user, name="agent")[1]

    out = chown(str(unowned.id).upper(), "bob")

    assert out.endswith("now belongs to bob (was alice)\n")
    assert Session.objects.get(id=unowned.id).owner == bob
    assert upload(agent_run.path.read_bytes(), alices).status_code == 403


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("not-a-uuid", "alice"), "not a session id: 'not-a-uuid' (expected a UUID"),
        (("01900000-0000-7000-8000-000000000001", "alice"), "no session 01900000-0000-7000"),
        (("{session}", "mallory"), "no user 'mallory'"),
    ],
    ids=["bad id", "unknown session", "unknown user"],
)
def test_chown_refuses_with_one_line_and_changes_nothing(unowned, user, arguments, message):
    arguments = tuple(a.replace("{session}", str(unowned.id)) for a in arguments)

    with pytest.raises(CommandError) as refused:
        chown(*arguments)

    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)
    assert Session.objects.get(id=unowned.id).owner is None


def test_chown_shows_a_hostile_title_escaped(data_dir, user):
    session = Session.objects.create(
        id=uuid.uuid4(), title="\x1b[2J\x1b]0;pwned\x07", created_at="2025-05-01T12:00:00Z"
    )

    out = chown(str(session.id), "alice")

    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out


def test_sessions_needs_an_action():
    with pytest.raises(CommandError):
        call_command("sessions", stdout=StringIO(), stderr=StringIO())
