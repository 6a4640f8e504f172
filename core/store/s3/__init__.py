"""Object storage: blobs and plain objects in an S3-compatible bucket (docs/object-storage.md).

- core.store.s3.client: boto3, imported on first use; its errors as core.store.errors.
- core.store.s3.objects: S3Objects, plain objects by name (session logs, derived files).
- core.store.s3.reader: S3Reader, range reads of one object (the store's BlobReader).
- core.store.s3.blob_store: S3BlobStore, the BlobStore over a bucket and prefix.

boto3 is imported when a store or an S3Objects is made, never by importing this package.
"""

from __future__ import annotations

from core.store.encoding import JSON_SUFFIX, TEXT_SUFFIX
from core.store.s3.blob_store import CONTENT_TYPES, KIND_HINTS_KEPT, S3BlobStore
from core.store.s3.client import S3_SCHEME, parse_s3_url
from core.store.s3.objects import (
    PART_SIZE,
    SINGLE_PUT_MAX,
    UPDATE_ATTEMPTS,
    ObjectInfo,
    ObjectVersion,
    S3Objects,
)
from core.store.s3.reader import PAGE, PAGES_KEPT, S3Reader

__all__ = [
    "CONTENT_TYPES",
    "JSON_SUFFIX",
    "KIND_HINTS_KEPT",
    "PAGE",
    "PAGES_KEPT",
    "PART_SIZE",
    "S3_SCHEME",
    "SINGLE_PUT_MAX",
    "TEXT_SUFFIX",
    "UPDATE_ATTEMPTS",
    "ObjectInfo",
    "ObjectVersion",
    "S3BlobStore",
    "S3Objects",
    "S3Reader",
    "parse_s3_url",
]
