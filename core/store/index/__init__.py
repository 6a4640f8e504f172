"""Indexes of stored blobs, written once and used by every reader (docs/store.md).

A blob's index lives in its store's hidden folder `.index/` as `<blob id>.idx` (in an
object store, under `<prefix>/.index/`), read and written through the store's index_*
methods (core.store.base), never by path: line
offsets for a text (core.store.index.text_index), the byte spans of a JSON value's entries and
keys (core.store.index.json_index). The store writes it when it stores a blob of at least
``index_min_bytes``; a blob stored before indexes existed gets its index the first time it
is read (:func:`open_index`). Indexes are caches: a missing, stale or damaged one is made
again, and one the store cannot take (a read-only store) is not needed — readers then
read the blob as they would without an index, with the same results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from core.content import Content, Structured
from core.json_stream import PromotedJson
from core.store.base import BlobReader
from core.store.blob_id import BlobId, parse_blob_id
from core.store.encoding import encode_content
from core.store.errors import IndexUnusable
from core.store.index.index_file import (
    INDEX_FOLDER,
    KIND_JSON,
    KIND_NONE,
    KIND_TEXT,
    BytesReader,
    Header,
    index_path,
    pack_index,
    read_header,
)
from core.store.index.json_from_file import json_index_from_file
from core.store.index.json_index import json_index_from_value
from core.store.index.json_reader import JsonIndex
from core.store.index.text_index import (
    IndexedLine,
    TextIndex,
    text_index_from_bytes,
    text_index_from_file,
)

if TYPE_CHECKING:
    from core.store.base import BlobStore

__all__ = [
    "INDEX_FOLDER",
    "INDEX_MIN_BYTES",
    "BlobIndex",
    "IndexUnusable",
    "IndexedLine",
    "JsonIndex",
    "TextIndex",
    "index_for",
    "index_in_memory",
    "index_path",
    "open_index",
]

# Blobs smaller than this get no index file: reading one whole costs about what reading
# its index would, and most tool outputs are small. (A small text is still read through
# an index built in memory, so `lines:` never holds the whole text.)
INDEX_MIN_BYTES = 1 << 20

BlobIndex = TextIndex | JsonIndex


def index_for(data: bytes, value: Any = None, *, is_text: bool) -> bytes | None:
    """The index of a blob being stored as *data*: a text, or the JSON *value*; None when
    *data* is not laid out as the value says (its index is then made from the blob)."""
    if is_text:
        return text_index_from_bytes(data)
    return json_index_from_value(value, data)


def index_in_memory(content: Content) -> BlobIndex:
    """The index of *content* as a store keeps it, built in memory over the bytes the store
    would keep, and read through them: a blob that has no index of its own (a small one)
    is read as an indexed one is. The caller closes it. Raises IndexUnusable for a value
    that cannot be indexed (one that is not JSON)."""
    data, kind = encode_content(content)
    blob = BytesReader(bytes(data), kind)
    if kind == "text":
        index: bytes | None = text_index_from_bytes(blob.data)
    elif isinstance(content, PromotedJson) and content.index is not None:
        index = content.index  # made as it was written
    else:
        assert isinstance(content, Structured)
        index = json_index_from_value(content.value, blob.data) or json_index_from_file(blob)
    if index is None:
        raise IndexUnusable("this value cannot be read as JSON")
    reader = BytesReader(index)
    header = read_header(reader, blob_size=blob.size, kinds=(KIND_TEXT, KIND_JSON))
    return TextIndex(blob, reader, header) if kind == "text" else JsonIndex(blob, reader, header)


def open_index(
    store: BlobStore, blob_id: BlobId | str, *, min_bytes: int = INDEX_MIN_BYTES
) -> BlobIndex | None:
    """The index of blob *blob_id* in *store*, open for reading; the caller closes it. None
    when the blob is read better without one: a JSON blob under *min_bytes*, one that
    cannot be indexed, or one whose index is missing in a store that cannot take it.

    A missing or stale index is made from the blob, kept in the store, and used; a text's
    is also made (in memory) when it cannot be kept, as reading through it still beats
    holding the text. Raises the store's errors when the blob cannot be opened.
    """
    name = str(parse_blob_id(blob_id))
    blob = store.open_sync(blob_id)
    try:
        is_text = blob.kind == "text"
        kind = KIND_TEXT if is_text else KIND_JSON
        opened = _open_kept(store, name, blob, kind)
        if opened is False:  # the blob cannot be indexed: remembered, not tried again
            blob.close()
            return None
        if opened is None:
            built = _build(store, name, blob, is_text=is_text, min_bytes=min_bytes)
            if built is None:
                blob.close()
                return None
            opened = built, read_header(built, blob_size=blob.size, kinds=(kind,))
        index, header = opened
        return TextIndex(blob, index, header) if is_text else JsonIndex(blob, index, header)
    except IndexUnusable:
        blob.close()
        return None
    except BaseException:
        blob.close()
        raise


def _open_kept(
    store: BlobStore, name: str, blob: BlobReader, kind: int
) -> tuple[BlobReader, Header] | Literal[False] | None:
    """The store's index of the blob, open, and its header, when it describes the blob as
    it is; False when it says the blob cannot be indexed; None when it is missing, stale
    or damaged."""
    index = store.index_reader_sync(name)
    if index is None:
        return None
    try:
        header = read_header(index, blob_size=blob.size, kinds=(kind, KIND_NONE))
    except IndexUnusable:
        index.close()
        return None
    except BaseException:
        index.close()
        raise
    if header.kind == KIND_NONE:
        index.close()
        return False
    return index, header


def _build(
    store: BlobStore, name: str, blob: BlobReader, *, is_text: bool, min_bytes: int
) -> BytesReader | None:
    writable = blob.size >= min_bytes and store.index_writable_sync()
    if not is_text and not writable:
        return None  # a small JSON blob, or no place to keep what a full pass would make
    data = text_index_from_file(blob) if is_text else json_index_from_file(blob)
    if data is None:
        if writable:
            store.index_put_sync(name, pack_index(KIND_NONE, blob.size, (0,) * 6, b""))
        return None
    if writable:
        store.index_put_sync(name, data)
    return BytesReader(data)
