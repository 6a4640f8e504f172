"""Where blobs live: the BlobStore contract, its stores, blob ids and errors, and the
indexes a store keeps of its blobs (core.store.index, SPEC 2.6).

- core.store.fs: FsBlobStore, a flat directory of immutable blob files.
- core.store.blob_id: UUID v7 blob ids and the `[blob:<id>]` references to them.
- core.store.errors: what a store raises.
- core.store.index: line offsets and JSON spans, so readers read only what they return.
"""

from __future__ import annotations

from core.store.errors import (
    BlobCorrupt,
    BlobIOError,
    BlobNotFound,
    BlobStoreError,
    InvalidBlobId,
)
from core.store.fs import JSON_SUFFIX, TEMP_PREFIX, TEXT_SUFFIX, BlobStore, FsBlobStore

__all__ = [
    "JSON_SUFFIX",
    "TEMP_PREFIX",
    "TEXT_SUFFIX",
    "BlobCorrupt",
    "BlobIOError",
    "BlobNotFound",
    "BlobStore",
    "BlobStoreError",
    "FsBlobStore",
    "InvalidBlobId",
]
