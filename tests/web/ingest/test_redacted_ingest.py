"""Secrets an agent printed are redacted before anything is stored: the items, the blobs
their outputs are promoted to, the session's title; counted per step and per session
(docs/redaction.md)."""

from __future__ import annotations

import json
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from blobviewer.ingest.importers import claude_code
from blobviewer.models import Blob, IngestedFile, Item, Session
from core.store import FsBlobStore
from importers.recordings import claude_line, write_jsonl
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

GITHUB = "ghp_" + "a1B2" * 9
AWS = "AKIAIOSFODNN7EXAMPLE"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAx\n-----END RSA PRIVATE KEY-----"
SECRETS = (GITHUB, AWS, "MIIEpAIBAAKCAQEAx", "Tr0ub4dor3")


def ingest(path: Path) -> str:
    out = StringIO()
    call_command("ingest", str(path), stdout=out, stderr=StringIO())
    return out.getvalue()


def everything_stored(data_dir: Path) -> str:
    """Every item's text, output, calls, note and title, the sessions' titles, and every
    blob file's bytes."""
    items = Item.objects.values_list("text", "output", "tool_calls", "note", "title")
    titles = Session.objects.values_list("title", flat=True)
    blobs = [path.read_text() for path in (data_dir / "blobs").rglob("*.*") if path.is_file()]
    return json.dumps([list(items), list(titles), blobs])


@pytest.fixture
def claude_session(tmp_path: Path) -> Path:
    """A Claude Code session in which the agent read an .env file and echoed a token."""
    listing = "\n".join(f"line {n}: nothing to see" for n in range(60))
    output = f"AWS_ACCESS_KEY_ID={AWS}\n{PEM}\n{listing}"  # over 800 bytes: promoted
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat .env"}}
    lines = [
        claude_line("user", f"Why does `git push` with {GITHUB} fail?", uuid="u1"),
        claude_line("assistant", [call], uuid="a1"),
        claude_line(
            "user", [{"type": "tool_result", "tool_use_id": "t1", "content": output}], uuid="u2"
        ),
        claude_line(
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": "t2",
                    "name": "Bash",
                    "input": {"command": "psql postgres://app:Tr0ub4dor3@db/app"},
                }
            ],
            uuid="a2",
        ),
    ]
    return write_jsonl(tmp_path / "session.jsonl", lines)


def test_secrets_are_redacted_out_of_items_blobs_and_titles(claude_session, data_dir):
    ingest(claude_session)

    stored = everything_stored(data_dir)
    assert not any(secret in stored for secret in SECRETS)
    assert "[redacted:github_token]" in stored and "[redacted:private_key]" in stored
    result = Item.objects.get(type="tool_result", call_id="t1")
    assert result.redactions == 2  # the AWS key and the private key
    blob = Blob.objects.get()
    content = FsBlobStore(data_dir / "blobs").load_sync(blob.id)
    assert "[redacted:aws_access_key]" in content.text and AWS not in content.text
    calls = Item.objects.get(type="assistant", seq=4).tool_calls
    assert calls[0]["arguments"]["command"] == "psql postgres://app:[redacted:url_password]@db/app"
    session = Session.objects.get()
    assert session.redaction_count == 4
    assert "[redacted:github_token]" in session.title


def test_with_blobviewer_redact_off_outputs_are_stored_as_recorded(
    claude_session, data_dir, monkeypatch
):
    monkeypatch.setenv("BLOBVIEWER_REDACT", "off")

    ingest(claude_session)

    stored = everything_stored(data_dir)
    assert all(secret in stored for secret in (GITHUB, AWS, "Tr0ub4dor3"))
    assert Session.objects.get().redaction_count == 0


def test_turning_redaction_back_on_reads_the_file_again(claude_session, data_dir, monkeypatch):
    """What redaction stores is part of an ingest's shape: a file ingested with it off is
    not 'unchanged' for an ingest with it on."""
    monkeypatch.setenv("BLOBVIEWER_REDACT", "off")
    ingest(claude_session)
    shape_off = IngestedFile.objects.get().shape
    monkeypatch.delenv("BLOBVIEWER_REDACT")

    out = ingest(claude_session)

    assert "unchanged" not in out
    assert IngestedFile.objects.get().shape != shape_off


def test_our_own_log_is_redacted_the_same_way_and_a_grown_log_keeps_its_items(write_log, data_dir):
    session_id = uuid.uuid4()
    secret_output = f"token={GITHUB}\n" + "x" * 900
    records = [header(session_id), user_item(1, f"deploy with {AWS}")]
    path = write_log([*records, tool_result_item(2, secret_output)])
    ingest(path)
    with path.open("a") as log:
        log.write(json.dumps(user_item(3, "and again")) + "\n")

    ingest(path)  # the items already recorded still match their lines

    assert Item.objects.filter(session_id=session_id).count() == 3
    assert not any(secret in everything_stored(data_dir) for secret in SECRETS)
    assert Session.objects.get(id=session_id).redaction_count == 2


def test_the_session_page_says_how_many_secrets_were_redacted(
    claude_session, data_dir, logged_in_client
):
    ingest(claude_session)
    session = Session.objects.get()

    page = logged_in_client.get(f"/sessions/{session.id}/").content.decode()

    assert "2 secrets redacted" in page  # the step that read .env
    assert "1 secret redacted" in page  # the question that quoted a token
    assert "<dt>Secrets redacted</dt>" in page and ">4</dd>" in page
    assert not any(secret in page for secret in SECRETS)


def test_a_rebuild_redacts_as_it_makes_new_blobs_and_leaves_stored_blobs_as_they_are(
    claude_session, data_dir, monkeypatch
):
    monkeypatch.setenv("BLOBVIEWER_REDACT", "off")
    ingest(claude_session)
    old_blob = Blob.objects.get()
    old_bytes = {p.name: p.read_bytes() for p in (data_dir / "blobs").rglob("*.*") if p.is_file()}
    monkeypatch.delenv("BLOBVIEWER_REDACT")
    version = claude_code.IMPORTER_VERSION
    monkeypatch.setattr(claude_code, "IMPORTER_VERSION", version + 1)  # a newer importer

    out = StringIO()
    call_command("ingest", "--rebuild", str(claude_session), stdout=out, stderr=StringIO())

    assert "1 new" in out.getvalue()  # the output that held secrets got a new blob
    result = Item.objects.get(type="tool_result", call_id="t1")
    assert result.redactions == 2 and AWS not in result.output
    new_blob = Blob.objects.exclude(id=old_blob.id).get()
    assert AWS not in FsBlobStore(data_dir / "blobs").load_sync(new_blob.id).text
    for name, data in old_bytes.items():  # a stored blob is never rewritten
        assert next((data_dir / "blobs").rglob(name)).read_bytes() == data
