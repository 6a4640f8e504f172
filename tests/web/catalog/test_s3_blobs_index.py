"""`manage.py blobs index` on object storage: blobs that agents wrote straight into the bucket
are found by listing it from a remembered marker, re-listing a trailing window for uploads
that landed behind a newer key; `--full` lists every blob (SeaweedFS, tests/s3_server.py)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from io import StringIO

import pytest
import uuid6
from django.core.management import call_command
from django.utils import timezone

from blobviewer.catalog import store_scan
from blobviewer.models import Blob
from core.content import Structured, Text
from core.store import open_store
from core.store.blob_id import BlobId
from core.store.s3 import S3Objects

pytestmark = pytest.mark.django_db


@pytest.fixture
def blob_backend() -> str:
    return "s3"


@pytest.fixture
def agent(store, s3_site):
    """Another writer of the bucket (an agent on another machine), with its own client."""
    return open_store(s3_site.url)


def made_at(moment: datetime) -> BlobId:
    """A UUID v7 made at *moment*, as an agent's clock made it then."""
    milliseconds = int(moment.timestamp() * 1000)
    return uuid.UUID(int=(uuid6.uuid7().int & ((1 << 80) - 1)) | (milliseconds << 80))


def minutes_ago(minutes: float) -> datetime:
    return timezone.now() - timedelta(minutes=minutes)


def put(agent, moment: datetime, text: str = "an output\n") -> BlobId:
    blob_id = made_at(moment)
    assert agent.put_sync(blob_id, Text(text))
    return blob_id


def index(*args: str) -> str:
    out = StringIO()
    call_command("blobs", "index", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def rows() -> set[uuid.UUID]:
    return set(Blob.objects.values_list("id", flat=True))


def test_the_first_run_lists_every_blob_and_remembers_a_marker_in_the_bucket(agent, s3_site):
    old = put(agent, minutes_ago(600))
    recent = put(agent, minutes_ago(2))
    table = made_at(minutes_ago(1))
    assert agent.put_sync(table, Structured([{"n": 1}, {"n": 2}]))

    out = index()

    assert rows() == {old, recent, table}
    assert Blob.objects.get(id=table).kind == "json_array"
    assert "3 blobs added to the index" in out and f"3 blobs in {s3_site.url}" in out
    marker = S3Objects.from_url(s3_site.url).get(".blobviewer/blobs-indexed.json")
    assert marker is not None and str(table.int >> 80) in marker.data.decode()


def test_a_later_run_lists_only_from_the_marker_less_the_window(agent):
    long_ago = put(agent, minutes_ago(600))
    put(agent, minutes_ago(5))
    index()
    Blob.objects.filter(id=long_ago).delete()  # a row the marker's listing cannot see
    newer = put(agent, minutes_ago(0))

    out = index()

    assert newer in rows() and long_ago not in rows()
    assert "1 blob added to the index" in out
    assert "2 blobs in" in out and "listed from the last run's marker" in out


def test_a_slow_upload_that_lands_behind_a_newer_key_is_found_next_time(agent):
    put(agent, minutes_ago(30))
    newest = put(agent, minutes_ago(1))
    index()
    # An upload that began 20 minutes ago (its id was made then) lands only now, behind
    # the newest key the last run listed.
    late = put(agent, minutes_ago(20), "a big output that took a while to upload\n")

    index()

    assert late in rows() and newest in rows()
    assert Blob.objects.get(id=late).size == len(b"a big output that took a while to upload\n")


def test_an_upload_later_than_the_window_takes_a_full_listing(agent, monkeypatch):
    monkeypatch.setattr(store_scan, "INDEX_WINDOW", timedelta(minutes=10))
    put(agent, minutes_ago(1))
    index()
    very_late = put(agent, minutes_ago(45))
    index()
    assert very_late not in rows()

    out = index("--full")

    assert very_late in rows()
    assert "1 blob added to the index" in out and "marker" not in out


def test_full_marks_blobs_gone_from_the_bucket_missing(agent, store):
    gone = put(agent, minutes_ago(3))
    index()
    agent.discard_sync(gone)

    out = index("--full")

    assert Blob.objects.get(id=gone).missing
    assert "1 now missing from the store" in out


def test_blobs_in_derived_and_sessions_are_not_blobs_of_the_store(agent, s3_site):
    blob = put(agent, minutes_ago(2))
    objects = S3Objects.from_url(s3_site.url)
    objects.put(f"derived/{made_at(minutes_ago(1))}.txt", b"a rendering\n")
    objects.put(f"sessions/{uuid.uuid4()}.jsonl", b"{}\n")
    index()
    objects.put(f"derived/{made_at(minutes_ago(0))}.txt", b"another rendering\n")

    index()

    assert rows() == {blob}


def test_the_blob_list_says_when_a_blob_arrived_after_the_last_run(agent, logged_in_client, store):
    note = "Blobs that agents or the CLI wrote straight into the store"
    assert note not in logged_in_client.get("/blobs/").content.decode()  # nothing to index
    put(agent, minutes_ago(2))
    assert "have not been indexed" in logged_in_client.get("/blobs/").content.decode()
    index()
    assert note not in logged_in_client.get("/blobs/").content.decode()

    put(agent, minutes_ago(0))

    page = logged_in_client.get("/blobs/").content.decode()
    assert "The blob store has changed since blobs were last indexed" in page
    index()
    assert note not in logged_in_client.get("/blobs/").content.decode()


def test_a_new_database_beside_an_indexed_bucket_gets_a_full_listing(agent):
    old = put(agent, minutes_ago(600))
    put(agent, minutes_ago(1))
    index()
    Blob.objects.all().delete()  # the team starts over on a new database

    out = index()

    assert old in rows()
    assert "2 blobs added to the index" in out and "marker" not in out
