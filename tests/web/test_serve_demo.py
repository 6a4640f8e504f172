"""`manage.py serve_demo` (what `make run` runs): demo data and an admin, in one command."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from blobviewer.models import Blob, Session
from core.store.s3 import S3Objects

pytestmark = pytest.mark.django_db


def serve_demo() -> str:
    out = StringIO()
    call_command("serve_demo", "--no-serve", stdout=out, stderr=StringIO())
    return out.getvalue()


def test_it_loads_the_demo_sessions_and_creates_an_admin_once(data_dir):
    out = serve_demo()

    assert Session.objects.count() >= 1
    assert Blob.objects.filter(missing=False).exists()
    assert any(data_dir.joinpath("sessions").glob("*.jsonl"))
    password = re.search(r"Created user admin with password (\S+)", out).group(1)
    # check_password, not authenticate(): axes needs a request to count a login against
    assert get_user_model().objects.get(username="admin").check_password(password)

    again = serve_demo()

    assert "Created user admin" not in again
    assert "No sessions in" not in again
    assert "unchanged since its last ingest" in again  # not even read again


def test_it_leaves_existing_sessions_and_users_alone(data_dir, sample_log, user):
    out = serve_demo()

    assert "No sessions in" not in out
    assert "Created user" not in out
    assert list(Session.objects.values_list("id", flat=True)) == [sample_log.id]


def test_on_object_storage_the_demo_blobs_go_into_the_bucket(data_dir, s3_site, settings, tmp_path):
    out = serve_demo()

    assert f"Blobs: {s3_site.url}" in out
    blobs = list(Blob.objects.all())
    assert blobs and not any(blob.missing for blob in blobs)
    bucket = S3Objects.from_url(s3_site.url)
    names = {info.name for info in bucket.list()}
    for blob in blobs:
        assert f"{blob.id}.txt" in names or f"{blob.id}.json" in names
    assert not any(data_dir.joinpath("blobs").iterdir())  # nothing only this host has
    for session in Session.objects.all():  # ingest kept the demo's logs in the bucket too
        assert f"sessions/{session.id}/blobviewer.recording" in names

    # A second server on the same database and bucket, with its own empty data folder.
    other = tmp_path / "other-host"
    (other / "sessions").mkdir(parents=True)
    settings.BLOBVIEWER_DATA = other
    sessions = Session.objects.count()

    again = serve_demo()

    assert "No sessions in" not in again
    assert Session.objects.count() == sessions
