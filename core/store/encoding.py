"""How every store keeps a blob as bytes, so that a blob reads the same from any of them:
a Text as UTF-8 (lone surrogates kept), a Structured value as compact JSON (docs/store.md).

`<id>.txt` holds a text, `<id>.json` a JSON value, as a file (core.store.fs) or as an
object (core.store.s3); :func:`encode_content` makes the bytes, :func:`decode_content`
reads them back, :func:`index_of_stored` is the index a store keeps beside a big blob.
"""

from __future__ import annotations

import contextlib
from typing import Any

from core.content import Content, Structured, Text, decode_text, encode_text
from core.json_stream import PromotedJson
from core.json_values import JsonError, dumps_for_storage, parse_json
from core.store.base import BlobKind
from core.store.errors import BlobCorrupt, BlobStoreError

TEXT_SUFFIX = ".txt"
JSON_SUFFIX = ".json"
SUFFIXES: dict[BlobKind, str] = {"text": TEXT_SUFFIX, "json": JSON_SUFFIX}
KINDS: dict[str, BlobKind] = {TEXT_SUFFIX: "text", JSON_SUFFIX: "json"}


def encode_content(content: Content) -> tuple[bytes, BlobKind]:
    """The bytes a store keeps for *content*, and its kind. A value that is not JSON raises
    BlobStoreError; anything but Text or Structured, TypeError."""
    if isinstance(content, Text):
        return encode_text(content.text), "text"
    if isinstance(content, PromotedJson):  # already written, entry by entry
        # A bytearray as it was written, not copied (a blob's size): callers only read it.
        return content.data, "json"  # type: ignore[return-value]  # bytearray is read as bytes
    if isinstance(content, Structured):
        try:
            return dumps_for_storage(content.value), "json"
        except (TypeError, ValueError, RecursionError) as error:
            raise BlobStoreError(f"cannot store this value as JSON: {error}") from None
    raise TypeError(f"content must be Text or Structured, got {type(content).__name__}")


def decode_content(blob_id: object, kind: BlobKind, data: bytes) -> Content:
    """The content that *data*, kept as a blob of *kind*, holds; BlobCorrupt when it does
    not read back as its kind (text that is not UTF-8, damaged JSON)."""
    if kind == "text":
        try:
            return Text(decode_text(data))
        except UnicodeDecodeError as error:
            raise BlobCorrupt(f"blob {blob_id} is not UTF-8 at byte {error.start}") from None
    try:
        return Structured(parse_json(data))
    except JsonError as error:
        raise BlobCorrupt(f"blob {blob_id} holds damaged JSON: {error}") from None


def index_of_stored(content: Content, data: bytes, *, min_bytes: int) -> bytes | None:
    """The index to keep beside a blob just stored as *data* (core.store.index), or None:
    a blob under *min_bytes*, or one whose index cannot be made here (readers then make it
    from the blob on first use). A promoted JSON brings the index made as it was written.
    Never raises: it is a cache."""
    from core.store.index import index_for  # the index modules read through core.store.base

    if len(data) < min_bytes:
        return None
    if isinstance(content, PromotedJson):
        return content.index
    is_text = isinstance(content, Text)
    value: Any = content.value if isinstance(content, Structured) else None
    with contextlib.suppress(ValueError, TypeError, RecursionError, MemoryError):
        return index_for(data, value, is_text=is_text)
    return None
