"""Indexes of stored blobs, written once and used by every reader (SPEC 2.6).

A blob's index lives in its store's hidden folder `.index/` as `<blob id>.idx`: line
offsets for a text (core.store.index.text_index), the byte spans of a JSON value's entries and
keys (core.store.index.json_index). The store writes it when it stores a blob of at least
``index_min_bytes``; a blob stored before indexes existed gets its index the first time it
is read (:func:`open_index`). Indexes are caches: a missing, stale or damaged one is made
again, and one the store cannot take (a read-only store) is not needed — readers then
read the blob as they would without an index, with the same results.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from core.store.index.index_file import (
    INDEX_FOLDER,
    KIND_JSON,
    KIND_NONE,
    KIND_TEXT,
    BytesReader,
    Header,
    IndexUnusable,
    Reader,
    can_write,
    index_files,
    index_path,
    pack_index,
    read_header,
    write_index,
)
from core.store.index.json_index import JsonIndex, json_index_from_file, json_index_from_value
from core.store.index.text_index import (
    IndexedLine,
    TextIndex,
    text_index_from_bytes,
    text_index_from_file,
)

__all__ = [
    "INDEX_FOLDER",
    "INDEX_MIN_BYTES",
    "BlobIndex",
    "IndexUnusable",
    "IndexedLine",
    "JsonIndex",
    "TextIndex",
    "discard_index",
    "index_files",
    "index_for",
    "index_path",
    "open_index",
    "store_index",
]

# Blobs smaller than this get no index file: reading one whole costs about what reading
# its index would, and most tool outputs are small. (A small text is still read through
# an index built in memory, so `lines:` never holds the whole text.)
INDEX_MIN_BYTES = 1 << 20

BlobIndex = TextIndex | JsonIndex

_TEXT_SUFFIX = ".txt"


def index_for(data: bytes, value: Any = None, *, is_text: bool) -> bytes | None:
    """The index of a blob being stored as *data*: a text, or the JSON *value*; None when
    *data* is not laid out as the value says (its index is then made from the file)."""
    if is_text:
        return text_index_from_bytes(data)
    return json_index_from_value(value, data)


def store_index(root: Path, name: str, index: bytes | None) -> bool:
    """Write a blob's index beside the blob (False when it could not be written)."""
    return index is not None and write_index(root, name, index)


def discard_index(root: Path, name: str) -> None:
    """Delete the index files of blob *name* (its blob is gone)."""
    for path in index_files(root, name):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def open_index(
    root: Path, blob_path: Path, *, min_bytes: int = INDEX_MIN_BYTES
) -> BlobIndex | None:
    """The index of the blob at *blob_path* (`<id>.txt` or `<id>.json` in the store at
    *root*), open for reading; the caller closes it. None when the blob is read better
    without one: a JSON blob under *min_bytes*, one that cannot be indexed, or one whose
    index is missing in a store that cannot take it.

    A missing or stale index is made from the blob's file, written, and used; a text's
    is also made (in memory) when it cannot be written, as reading through it still
    beats holding the text. Raises OSError when the blob cannot be opened.
    """
    is_text = blob_path.suffix == _TEXT_SUFFIX
    kind = KIND_TEXT if is_text else KIND_JSON
    name = blob_path.stem
    blob = Reader(blob_path)
    try:
        opened = _open_file(index_path(root, name), blob, kind)
        if opened is False:  # the blob cannot be indexed: remembered, not tried again
            blob.close()
            return None
        if opened is None:
            built = _build(root, name, blob, blob_path, is_text=is_text, min_bytes=min_bytes)
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


def _open_file(path: Path, blob: Reader, kind: int) -> tuple[Reader, Header] | bool | None:
    """The index file, open, and its header, when it describes the blob as it is; False
    when it says the blob cannot be indexed; None when it is missing, stale or damaged."""
    try:
        index = Reader(path)
    except OSError:
        return None
    try:
        header = read_header(index, blob_size=blob.size, kinds=(kind, KIND_NONE))
    except IndexUnusable:
        index.close()
        return None
    if header.kind == KIND_NONE:
        index.close()
        return False
    return index, header


def _build(
    root: Path, name: str, blob: Reader, blob_path: Path, *, is_text: bool, min_bytes: int
) -> BytesReader | None:
    writable = blob.size >= min_bytes and can_write(root)
    if not is_text and not writable:
        return None  # a small JSON blob, or no place to keep what a full pass would make
    data = text_index_from_file(blob_path) if is_text else json_index_from_file(blob_path)
    if data is None:
        data = pack_index(KIND_NONE, blob.size, (0,) * 6, b"")
        if writable:
            write_index(root, name, data)
        return None
    if writable:
        write_index(root, name, data)
    return BytesReader(data)
