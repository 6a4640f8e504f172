"""`manage.py sessions export`: what it says when it cannot export (one line, a non-zero
exit, never a traceback, and no file half written)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from blobviewer.models import Item, Session

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def session(data_dir: Path) -> Session:
    session = Session.objects.create(id=uuid.uuid4(), created_at=datetime(2026, 1, 2, tzinfo=UTC))
    Item.objects.create(session=session, seq=1, type="user", text="hello")
    return session


def export_error(*arguments: str) -> str:
    with pytest.raises(CommandError) as raised:
        call_command("sessions", "export", *arguments, stdout=StringIO(), stderr=StringIO())
    return str(raised.value)


def test_an_unknown_session_is_named(session):
    missing = uuid.uuid4()
    assert export_error(str(missing)) == f"no session {missing}"


def test_a_session_id_must_be_a_uuid(session):
    assert export_error("not-a-session").startswith("not a session id: 'not-a-session'")


def test_an_unknown_format_says_which_there_are(session):
    assert export_error(str(session.id), "--format", "pdf") == "unknown format 'pdf': atif or html"


def test_inline_blobs_is_for_atif_only(session):
    assert export_error(str(session.id), "--format", "html", "--inline-blobs").startswith(
        "--inline-blobs is for --format atif"
    )


def test_an_unwritable_file_is_said_and_nothing_is_left(session, tmp_path):
    assert export_error(str(session.id), "--output", str(tmp_path / "no" / "such" / "x.json")) == (
        f"cannot write {tmp_path / 'no' / 'such' / 'x.json'}: No such file or directory"
    )
    folder = tmp_path / "a-folder"
    folder.mkdir()
    assert export_error(str(session.id), "-o", str(folder)).startswith(f"cannot write {folder}: ")
    assert list(tmp_path.glob("**/*.tmp")) == []


def test_html_goes_to_stdout_without_a_file(session):
    out = StringIO()
    call_command("sessions", "export", str(session.id), "--format", "html", stdout=out)
    assert out.getvalue().startswith("<!doctype html>")
    assert "hello" in out.getvalue()


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--format", "pdf"], "CommandError: unknown format 'pdf': atif or html"),
        ([], "CommandError: cannot read the sessions: "),  # a data folder never set up
    ],
)
def test_at_the_command_line_an_error_is_one_line_and_a_non_zero_exit(tmp_path, arguments, message):
    environment = {**os.environ, "BLOBVIEWER_DATA": str(tmp_path / "data")}
    environment.pop("DATABASE_URL", None)
    ran = subprocess.run(
        [sys.executable, "manage.py", "sessions", "export", str(uuid.uuid4()), *arguments],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode != 0
    assert ran.stdout == ""
    assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert ran.stderr.startswith(message)
