"""blobviewer core: keep large tool outputs out of an LLM agent's context.

Framework-free: nothing in this package imports Django or reads settings; callers
pass paths and policies in as arguments.

The names below are loaded when first used (PEP 562), so that importing one small module
of the package (`core.agent.policy`, say) does not import the store and asyncio with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from core.store.blob_id import (
        BlobId,
        blob_created_at,
        find_blob_refs,
        new_blob_id,
        parse_blob_id,
    )
    from core.summary import summarize

_MODULES = {
    "core.agent.policy": ("DEFAULT_POLICY", "Policy"),
    "core.content": (
        "Content",
        "Inline",
        "Stored",
        "Structured",
        "Text",
        "ToolOutput",
        "content_kind",
    ),
    "core.promotion": ("Admitted", "admit", "admit_sync", "promote"),
    "core.store": (
        "BlobCorrupt",
        "BlobIOError",
        "BlobNotFound",
        "BlobStore",
        "BlobStoreError",
        "FsBlobStore",
        "InvalidBlobId",
    ),
    "core.store.blob_id": (
        "BlobId",
        "blob_created_at",
        "find_blob_refs",
        "new_blob_id",
        "parse_blob_id",
    ),
    "core.summary": ("summarize",),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "Admitted",
    "BlobCorrupt",
    "BlobIOError",
    "BlobId",
    "BlobNotFound",
    "BlobStore",
    "BlobStoreError",
    "Content",
    "DEFAULT_POLICY",
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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once
    return value
