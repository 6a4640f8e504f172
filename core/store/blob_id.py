"""Blob ids: UUID v7, so an id also tells when its blob was made."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import uuid6

from core.store.errors import InvalidBlobId

BlobId = uuid.UUID

# `[blob:<uuid>]` as it appears at the start of a summary or an inspect header.
BLOB_REF = re.compile(
    r"\[blob:([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\]"
)


def new_blob_id() -> BlobId:
    return uuid6.uuid7()


def parse_blob_id(value: str | uuid.UUID) -> BlobId:
    """The UUID that *value* spells; raises InvalidBlobId for anything else."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        raise InvalidBlobId(f"blob id must be a string, got {type(value).__name__}")
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise InvalidBlobId(f"not a blob id: {shown!r} (expected a UUID)") from None


def blob_created_at(blob_id: BlobId) -> datetime | None:
    """Creation time from a UUID v7's 48-bit millisecond timestamp; None for other versions."""
    if blob_id.version != 7:
        return None
    try:
        return datetime.fromtimestamp((blob_id.int >> 80) / 1000, tz=UTC)
    except (ValueError, OverflowError, OSError):  # a crafted id, past year 9999
        return None


def find_blob_refs(text: str) -> list[BlobId]:
    """Every `[blob:<uuid>]` in *text*, in order of first appearance, without repeats."""
    if "[blob:" not in text:  # most texts: a substring search is much quicker than the regex
        return []
    seen: dict[BlobId, None] = {}
    for match in BLOB_REF.finditer(text):
        seen.setdefault(uuid.UUID(match.group(1)), None)
    return list(seen)
