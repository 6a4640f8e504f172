"""BLOBVIEWER_BLOBS picks the site's store: the data directory's folders by default, an
object store's prefix when it names one; anything else is refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from blobviewer.catalog.session_logs import FileSessionLogs, ObjectSessionLogs, session_logs
from blobviewer.data_dir import blob_store, renderings, store_location
from core.store import FsBlobStore
from core.store.s3 import S3BlobStore

ROOT = Path(__file__).resolve().parents[2]


def test_by_default_everything_is_in_the_data_directory(data_dir, settings):
    settings.BLOBVIEWER_BLOBS = ""

    assert isinstance(blob_store(), FsBlobStore) and isinstance(renderings(), FsBlobStore)
    assert isinstance(session_logs(), FileSessionLogs)
    assert store_location() == str(data_dir / "blobs")


def test_an_s3_url_puts_blobs_renderings_and_logs_under_its_prefix(s3_site):
    store, rendered, logs = blob_store(), renderings(), session_logs()

    assert isinstance(store, S3BlobStore) and store.url == s3_site.url
    assert isinstance(rendered, S3BlobStore) and rendered.url == f"{s3_site.url}/derived"
    assert isinstance(logs, ObjectSessionLogs) and logs.objects.url == f"{s3_site.url}/sessions"
    assert store_location() == s3_site.url
    assert blob_store() is store  # one client per URL, not one per request


def check_with(tmp_path: Path, blobs: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    env.update({"BLOBVIEWER_DATA": str(tmp_path), "BLOBVIEWER_BLOBS": blobs})
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_value_that_is_no_s3_url_is_refused_in_one_line(tmp_path):
    result = check_with(tmp_path, "/srv/blobs")

    assert result.returncode != 0
    assert (
        "BLOBVIEWER_BLOBS must be empty (the blobs/ folder in BLOBVIEWER_DATA) or "
        "s3://bucket/prefix, got '/srv/blobs'"
    ) in result.stderr


def test_a_bucket_name_s3_would_refuse_is_refused_before_anything_runs(tmp_path):
    result = check_with(tmp_path, "s3://Team_Blobs/prefix")

    assert result.returncode != 0
    assert "BLOBVIEWER_BLOBS: not an S3 bucket name: 'Team_Blobs'" in result.stderr


def test_an_s3_url_passes_the_checks(tmp_path):
    result = check_with(tmp_path, "s3://team-blobs/blobviewer")

    assert result.returncode == 0, result.stderr
