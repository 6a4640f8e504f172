"""`manage.py prune` on object storage: an idle session's uploaded log and its blobs go
from the bucket with their indexes and renderings; what is kept stays, byte for byte."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
import uuid6
from django.core.management import call_command
from django.utils import timezone

from blobviewer.catalog import blobs as catalog
from blobviewer.catalog.retention import prune
from blobviewer.data_dir import renderings
from blobviewer.models import Blob, PrunedBlob, PrunedSession, Session
from core.content import Structured, Text
from core.store.blob_id import BlobId
from core.store.s3 import S3Objects
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

NINETY_DAYS = timedelta(days=90)
BIG_TEXT = "".join(f"line {n} of a big stored output\n" for n in range(40_000))  # > 1 MB


@pytest.fixture
def blob_backend() -> str:
    return "s3"


@pytest.fixture
def bucket(store, s3_site) -> S3Objects:
    """Every object under the site's prefix, read straight from the bucket."""
    return S3Objects.from_url(s3_site.url)


def days_ago(days: float) -> datetime:
    return timezone.now() - timedelta(days=days)


def blob_id_made_at(moment: datetime) -> BlobId:
    milliseconds = int(moment.timestamp() * 1000)
    return uuid.UUID(int=(uuid6.uuid7().int & ((1 << 80) - 1)) | (milliseconds << 80))


def put_blob(store, days: float, content) -> BlobId:
    blob_id = blob_id_made_at(days_ago(days))
    assert store.put_sync(blob_id, content)
    return blob_id


def upload(client, secret: str, days: float, blobs: tuple[BlobId, ...] = ()) -> Session:
    """A session sent to /api/sessions (its log kept in the bucket), idle for *days*."""
    session_id = uuid.uuid4()
    at = days_ago(days).isoformat()
    records: list[dict[str, Any]] = [
        header(session_id, created_at=at),
        {**user_item(1, "run the tools"), "at": at},
    ]
    for seq, blob_id in enumerate(blobs, start=2):
        output = f"[blob:{blob_id}] text, 60 lines\nfirst lines ..."
        records.append({**tool_result_item(seq, output, call_id=f"c{seq}"), "at": at})
    body = "".join(json.dumps(r) + "\n" for r in records).encode()
    response = client.post(
        "/api/sessions",
        data=body,
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 201, response.content
    Session.objects.filter(id=session_id).update(updated_at=days_ago(days))
    return Session.objects.get(id=session_id)


def names(bucket: S3Objects) -> set[str]:
    return {info.name for info in bucket.list()}


def test_prune_deletes_the_idle_sessions_log_and_blobs_with_their_indexes_and_renderings(
    client, api_token, store, bucket, data_dir, monkeypatch
):
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 100)
    secret = api_token[1]
    big = put_blob(store, 200, Text(BIG_TEXT))  # has an index in .index/
    table = put_blob(store, 200, Structured([{"n": n, "label": f"entry {n}"} for n in range(50)]))
    kept_blob = put_blob(store, 200, Structured([{"n": n} for n in range(50)]))
    fresh = put_blob(store, 1, Text("made yesterday\n"))
    old = upload(client, secret, 120, blobs=(big, table))
    kept = upload(client, secret, 5, blobs=(kept_blob,))
    assert renderings().exists_sync(table) and renderings().exists_sync(kept_blob)
    before = names(bucket)
    assert {
        f"{big}.txt",
        f".index/{big}.idx",
        f"{table}.json",
        f"derived/{table}.txt",
        f"sessions/{old.id}.jsonl",
        f"sessions/{kept.id}.jsonl",
    } <= before
    rendering_index = {name for name in before if name.startswith(f"derived/.index/{table}")}
    kept_objects = {
        name: bucket.get(name).data
        for name in before
        if str(kept_blob) in name or str(fresh) in name
    }
    kept_objects[f"sessions/{kept.id}.jsonl"] = bucket.get(f"sessions/{kept.id}.jsonl").data
    sizes = {info.name: info.size for info in bucket.list()}
    dry = prune(older_than=NINETY_DAYS, dry_run=True)

    report = prune(older_than=NINETY_DAYS)

    after = names(bucket)
    gone = before - after
    assert gone == {
        f"{big}.txt",
        f".index/{big}.idx",
        f"{table}.json",
        f"derived/{table}.txt",
        f"sessions/{old.id}.jsonl",
        *rendering_index,
    }
    for name, data in kept_objects.items():
        assert bucket.get(name).data == data
    assert (report.sessions, report.blobs) == (1, 2)
    assert report.blob_bytes == sizes[f"{big}.txt"] + sizes[f"{table}.json"]
    assert report.log_bytes == sizes[f"sessions/{old.id}.jsonl"]
    assert report.derived_bytes == sum(
        sizes[name] for name in gone if name.startswith((".index/", "derived/"))
    )
    assert (dry.blob_bytes, dry.log_bytes, dry.derived_bytes) == (
        report.blob_bytes,
        report.log_bytes,
        report.derived_bytes,
    )
    assert PrunedSession.objects.filter(id=old.id).exists()
    assert set(PrunedBlob.objects.values_list("id", flat=True)) == {big, table}
    assert not Blob.objects.filter(id__in=[big, table]).exists()
    # Nothing was ever on this host's disk.
    assert list((data_dir / "sessions").iterdir()) == []


def test_the_prune_command_reports_the_objects_it_freed(client, api_token, store, bucket):
    blob = put_blob(store, 200, Text("an old output\n" * 100))
    session = upload(client, api_token[1], 120, blobs=(blob,))
    log_size = bucket.head(f"sessions/{session.id}.jsonl").size
    out = StringIO()

    call_command("prune", "--older-than", "90d", stdout=out, stderr=StringIO())

    assert "pruned 1 session (2 items) and 1 blob" in out.getvalue()
    assert f"{1400 + log_size:,} bytes: 1,400 of blob files, {log_size:,} of session logs" in (
        out.getvalue()
    )
    assert names(bucket) == set()


def test_an_upload_for_the_pruned_session_answers_410(client, api_token, store, bucket):
    session = upload(client, api_token[1], 120)
    log = bucket.get(f"sessions/{session.id}.jsonl").data
    prune(older_than=NINETY_DAYS)

    response = client.post(
        "/api/sessions",
        data=log,
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {api_token[1]}"},
    )

    assert response.status_code == 410
    assert bucket.head(f"sessions/{session.id}.jsonl") is None
