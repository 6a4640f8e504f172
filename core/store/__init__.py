"""Where blobs live: the BlobStore contract, its stores, blob ids and errors, and the
indexes a store keeps of its blobs (core.store.index, docs/store.md).

- core.store.base: the BlobStore protocol (and BlobReader, BlobStat): reads by range, not path.
- core.store.fs: FsBlobStore, a flat directory of immutable blob files.
- core.store.s3: S3BlobStore, objects in an S3-compatible bucket (boto3 imported only then).
- core.store.blob_id: UUID v7 blob ids and the `[blob:<id>]` references to them.
- core.store.errors: what a store raises.
- core.store.index: line offsets and JSON spans, so readers read only what they return.
"""

from __future__ import annotations

import os
from typing import Any

from core.store.base import BlobKind, BlobReader, BlobStat, BlobStore
from core.store.encoding import JSON_SUFFIX, TEXT_SUFFIX
from core.store.errors import (
    BlobCorrupt,
    BlobIOError,
    BlobNotFound,
    BlobStoreError,
    IndexUnusable,
    InvalidBlobId,
    StoreUnavailable,
)
from core.store.fs import TEMP_PREFIX, FsBlobStore

__all__ = [
    "JSON_SUFFIX",
    "TEMP_PREFIX",
    "TEXT_SUFFIX",
    "BlobCorrupt",
    "BlobIOError",
    "BlobKind",
    "BlobNotFound",
    "BlobReader",
    "BlobStat",
    "BlobStore",
    "BlobStoreError",
    "FsBlobStore",
    "IndexUnusable",
    "InvalidBlobId",
    "StoreUnavailable",
    "open_store",
]

S3_SCHEME = "s3://"


def open_store(url_or_path: str | os.PathLike[str], **options: Any) -> BlobStore:
    """The store at *url_or_path*: ``s3://bucket/prefix`` is an S3BlobStore (boto3 is
    imported only then), anything else a folder (FsBlobStore). *options* go to the store
    (e.g. ``fsync=``, ``index_min_bytes=``)."""
    if isinstance(url_or_path, str) and url_or_path.startswith(S3_SCHEME):
        from core.store.s3 import S3BlobStore  # noqa: PLC0415 (boto3 only for an S3 store)

        return S3BlobStore.from_url(url_or_path, **options)
    return FsBlobStore(url_or_path, **options)
