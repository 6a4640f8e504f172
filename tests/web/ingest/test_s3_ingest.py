"""`manage.py ingest` with the site's blobs on object storage: big tool outputs of another
agent's recording are promoted into the bucket, and the pages read them from there."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from blobviewer.models import Blob, BlobRef, Session
from core.store.s3 import S3Objects

pytestmark = pytest.mark.django_db

OUTPUT = "".join(f"match {n}: src/module_{n}.py: TODO\n" for n in range(400))


@pytest.fixture
def blob_backend() -> str:
    return "s3"


def test_ingest_promotes_big_outputs_into_the_bucket(tmp_path, store, s3_site, logged_in_client):
    chat = tmp_path / "chat.json"
    messages = [
        {"role": "user", "content": "find the TODOs"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": OUTPUT},
        {"role": "assistant", "content": "done"},
    ]
    chat.write_text(json.dumps(messages))

    call_command("ingest", str(chat), stdout=StringIO(), stderr=StringIO())

    ref = BlobRef.objects.get()
    assert store.load_sync(ref.blob_id).text == OUTPUT
    bucket = S3Objects.from_url(s3_site.url)
    assert bucket.get(f"{ref.blob_id}.txt").data == OUTPUT.encode()
    assert not Blob.objects.get(id=ref.blob_id).missing
    page = logged_in_client.get(f"/blobs/{ref.blob_id}/?selector=grep:module_399")
    assert page.status_code == 200
    assert "match 399: src/<mark>module_399</mark>.py" in page.content.decode()
    session_page = logged_in_client.get(f"/sessions/{Session.objects.get().id}/")
    assert f"/blobs/{ref.blob_id}/" in session_page.content.decode()

    call_command("ingest", str(chat), stdout=StringIO(), stderr=StringIO())  # idempotent

    assert BlobRef.objects.count() == 1
    assert [name for name in (i.name for i in bucket.list()) if "/" not in name] == [
        f"{ref.blob_id}.txt"
    ]
