"""Where the site keeps things, looked up on every call: the data directory
(settings.BLOBVIEWER_DATA) and the blob store (settings.BLOBVIEWER_BLOBS).

With BLOBVIEWER_BLOBS empty (the default) everything is in the data directory: `blobs/`
(the FsBlobStore agents write), `derived/` (renderings) and `sessions/` (session logs).
With `s3://bucket/prefix` the blobs are the objects under `<prefix>/`, the renderings
under `<prefix>/derived/` and the uploaded session logs under `<prefix>/sessions/`, so
every server on that bucket sees the same ones; the data directory then holds only what
one host may keep to itself (the SQLite database of one person, lock files, uploads being
received).

Looking the settings up each time (rather than at import) lets tests point the site at a
temporary data directory or bucket with override_settings. An object store's client is
made once per URL and kept (it is thread-safe, and costly to make per request).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from django.conf import settings

from core.store import BlobStore, open_store

S3_SCHEME = "s3://"


def data_dir() -> Path:
    return Path(settings.BLOBVIEWER_DATA)


def blobs_url() -> str:
    """The object store's `s3://bucket/prefix` (no trailing slash); "" for the data
    directory's folders."""
    return str(getattr(settings, "BLOBVIEWER_BLOBS", "") or "").strip().rstrip("/")


def on_object_store() -> bool:
    return blobs_url().startswith(S3_SCHEME)


def store_location() -> str:
    """Where the blobs are, for messages: the blobs folder's path, or the store's URL."""
    return blobs_url() or str(data_dir() / "blobs")


def blob_store() -> BlobStore:
    """The store the agents write to: `<data>/blobs`, or the objects under the prefix."""
    if url := blobs_url():
        return _object_store(url, _aws_environment())
    return open_store(data_dir() / "blobs")


def renderings() -> BlobStore:
    """`<data>/derived` (or `<prefix>/derived/`): each big JSON blob indented, as the blob
    page shows it, so that a page reads only its own lines (blobs are immutable, so is
    this; safe to delete)."""
    if url := blobs_url():
        return _object_store(f"{url}/derived", _aws_environment())
    return open_store(data_dir() / "derived")


def sessions_dir() -> Path:
    """Where session logs are recorded on this host: `<data>/sessions` (uploaded logs go
    through blobviewer.catalog.session_logs, which knows about object stores)."""
    return data_dir() / "sessions"


def _aws_environment() -> tuple[tuple[str, str], ...]:
    # Part of the cache key: a client made for one endpoint or key is never reused for
    # another (tests start their own server; an operator may rotate keys and restart).
    names = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
    return tuple((name, os.environ.get(name, "")) for name in names)


@functools.lru_cache(maxsize=16)
def _object_store(url: str, environment: tuple[tuple[str, str], ...]) -> BlobStore:
    del environment  # only a cache key: boto3 reads the variables itself
    return open_store(url)
