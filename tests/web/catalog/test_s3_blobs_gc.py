"""`manage.py blobs gc` on object storage: multipart uploads that a killed writer never
completed are aborted once old enough, and the blobs a killed ingest wrote into the bucket
are removed from its journal in the local data folder (SeaweedFS, tests/s3_server.py)."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import call_command

from blobviewer.ingest.journal import IngestJournal
from core.content import Text
from core.store.blob_id import new_blob_id

pytestmark = pytest.mark.django_db


@pytest.fixture
def blob_backend() -> str:
    return "s3"


def gc(*args: str) -> str:
    out = StringIO()
    call_command("blobs", "gc", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def uploads(client, place) -> list[str]:
    listed = client.list_multipart_uploads(Bucket=place.bucket, Prefix=f"{place.prefix}/")
    return sorted(upload["Key"] for upload in listed.get("Uploads", ()))


def test_gc_aborts_multipart_uploads_a_killed_writer_left(store, s3_site):
    client = s3_site.client()
    key = f"{s3_site.prefix}/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.txt"
    started = client.create_multipart_upload(Bucket=s3_site.bucket, Key=key)
    client.upload_part(
        Bucket=s3_site.bucket,
        Key=key,
        UploadId=started["UploadId"],
        PartNumber=1,
        Body=b"x" * (5 << 20),
    )
    elsewhere = client.create_multipart_upload(Bucket=s3_site.bucket, Key="another-prefix/x.txt")
    assert uploads(client, s3_site) == [key]

    assert "Aborted 0 multipart uploads older than 1h" in gc()  # may still be going on
    time.sleep(1.5)
    assert "Would abort 1 multipart upload older than 1s" in gc("--older-than", "1s", "--dry-run")
    assert uploads(client, s3_site) == [key]

    out = gc("--older-than", "1s")

    assert f"Aborted 1 multipart upload older than 1s in {s3_site.url}" in out
    assert uploads(client, s3_site) == []
    assert not client.list_objects_v2(Bucket=s3_site.bucket, Prefix=key).get("Contents")
    # Outside the prefix: not the site's, left alone.
    others = client.list_multipart_uploads(Bucket=s3_site.bucket, Prefix="another-prefix/")
    assert [upload["Key"] for upload in others["Uploads"]] == ["another-prefix/x.txt"]
    client.abort_multipart_upload(
        Bucket=s3_site.bucket, Key="another-prefix/x.txt", UploadId=elsewhere["UploadId"]
    )


def test_gc_on_a_folder_store_says_nothing_of_uploads(data_dir):
    assert "multipart" not in gc()


def test_gc_removes_from_the_bucket_the_blobs_a_killed_ingest_journaled(store, s3_site, data_dir):
    by_agent = store.store_sync(Text("an agent wrote this straight into the bucket\n"))
    killed = IngestJournal()
    orphan = new_blob_id()
    killed.record(orphan)
    store.put_sync(orphan, Text("promoted by an ingest that was killed\n"))
    killed.close()
    # The journal is a file of the host that ingested, beside its database settings.
    assert killed.path is not None and killed.path.parent == data_dir / "ingest-journal"

    out = gc()

    assert not store.exists_sync(orphan)
    assert store.exists_sync(by_agent)
    assert not killed.path.exists()
    assert "Removed 1 blob that killed ingests wrote and no session references (38 bytes)" in out
