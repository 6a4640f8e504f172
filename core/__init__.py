"""blobviewer core: keep large tool outputs out of an LLM agent's context.

Framework-free: nothing in this package imports Django or reads settings; callers
pass paths and policies in as arguments.
"""

from __future__ import annotations

from core.agent.policy import DEFAULT_POLICY, Policy
from core.content import Content, Inline, Stored, Structured, Text, ToolOutput, content_kind
from core.promotion import Admitted, admit, admit_sync, promote
from core.store import (
    BlobCorrupt,
    BlobIOError,
    BlobNotFound,
    BlobStore,
    BlobStoreError,
    FsBlobStore,
    InvalidBlobId,
)
from core.store.blob_id import BlobId, blob_created_at, find_blob_refs, new_blob_id, parse_blob_id
from core.summary import summarize

__all__ = [
    "DEFAULT_POLICY",
    "Admitted",
    "BlobCorrupt",
    "BlobIOError",
    "BlobId",
    "BlobNotFound",
    "BlobStore",
    "BlobStoreError",
    "Content",
    "FsBlobStore",
    "Inline",
    "InvalidBlobId",
    "Policy",
    "Stored",
    "Structured",
    "Text",
    "ToolOutput",
    "admit",
    "admit_sync",
    "blob_created_at",
    "content_kind",
    "find_blob_refs",
    "new_blob_id",
    "parse_blob_id",
    "promote",
    "summarize",
]
