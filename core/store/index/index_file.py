"""Index files: where a blob's index lives, its header, and how it is written and read.

A store keeps the indexes of its blobs in the hidden folder `.index/` (docs/store.md), one file
per blob, `<blob id>.idx`. An index file starts with a fixed header that names the blob's
byte length, the format version and the kind of index; a reader that finds a missing,
short, stale (another length) or foreign file treats it as absent. Indexes are caches:
written atomically (a temporary `.tmp-*` file in `.index/`, renamed into place), never
required, and deleting them changes nothing but speed.

Every read of an index and of the blob it describes goes through a BlobReader (the store's
positioned reads: `os.pread` in the file store), never holding a whole file. The functions
that name paths here are the file store's (core.store.fs); readers ask the store.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from core.store.base import BLOCK, BlobKind, BlobReader
from core.store.errors import IndexUnusable

INDEX_FOLDER = ".index"
INDEX_SUFFIX = ".idx"
# The same prefix as the blob store's temporary files, so `blobs gc` knows them.
TEMP_PREFIX = ".tmp-"
MAGIC = b"BVIDX\r\n\x1a"
VERSION = 1

KIND_NONE = 0  # the blob cannot be indexed (remembered, so it is not tried on every read)
KIND_TEXT = 1
KIND_JSON = 2

# magic, version, kind, flags, blob size, index size, then six fields the kind defines.
HEADER = struct.Struct("<8sHHIQQ6Q")


@dataclass(frozen=True, slots=True)
class Header:
    kind: int
    flags: int
    blob_size: int
    index_size: int
    fields: tuple[int, ...]  # six kind-specific numbers

    def pack(self) -> bytes:
        return HEADER.pack(
            MAGIC, VERSION, self.kind, self.flags, self.blob_size, self.index_size, *self.fields
        )


def pack_numbers(numbers: Iterable[int], typecode: str) -> bytes:
    """*numbers* as a table of fixed-width records, little-endian: 4 bytes each for
    *typecode* "I", 8 for "Q"."""
    table = numbers if isinstance(numbers, array) else array(typecode, numbers)
    if sys.byteorder == "big":
        table = array(typecode, table)
        table.byteswap()
    return table.tobytes()


def unpack_numbers(data: bytes, typecode: str) -> array[int]:
    """The numbers of a table that :func:`pack_numbers` wrote."""
    table = array(typecode)
    table.frombytes(data)
    if sys.byteorder == "big":
        table.byteswap()
    return table


def index_path(root: Path, name: str) -> Path:
    """The index file of the blob named *name* (its canonical id) in the store at *root*."""
    return root / INDEX_FOLDER / f"{name}{INDEX_SUFFIX}"


def index_files(root: Path, name: str) -> list[Path]:
    """The files in *root*/.index/ that belong to the blob *name* (those that exist)."""
    folder = root / INDEX_FOLDER
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    return sorted(
        Path(entry.path)
        for entry in entries
        if entry.name.startswith(name) and entry.is_file(follow_symlinks=False)
    )


def pack_index(
    kind: int, blob_size: int, fields: tuple[int, ...], body: bytes, *, flags: int = 0
) -> bytes:
    """The bytes of a whole index file: the header, then *body*."""
    header = Header(kind, flags, blob_size, HEADER.size + len(body), fields)
    return header.pack() + body


def write_index(root: Path, name: str, data: bytes) -> bool:
    """Write *data* as the index of blob *name*, atomically; False when the store cannot
    take it (a read-only store, a full disk), which costs readers speed only."""
    folder = root / INDEX_FOLDER
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temp, index_path(root, name))
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        return False


def can_write(root: Path) -> bool:
    """Whether an index could be written into *root*/.index/ (checked before the work of
    building one that would be thrown away)."""
    folder = root / INDEX_FOLDER
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


class BytesReader:
    """A BlobReader over bytes in memory: an index built for one call and not kept (a
    blob too small to be worth an index file, or a store that cannot take one)."""

    __slots__ = ("data", "kind", "size")

    def __init__(self, data: bytes, kind: BlobKind = "text") -> None:
        self.data = data
        self.kind = kind
        self.size = len(data)

    def read(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + max(size, 0)]

    def exact(self, offset: int, size: int) -> bytes:
        data = self.read(offset, size)
        if len(data) != size:
            raise IndexUnusable("a read went past the end of the index")
        return data

    def blocks(self, start: int = 0, block: int = BLOCK) -> Iterator[bytes]:
        for at in range(max(start, 0), self.size, block):
            yield self.data[at : at + block]

    def close(self) -> None:
        pass

    def __enter__(self) -> BytesReader:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def read_header(reader: BlobReader, *, blob_size: int, kinds: tuple[int, ...]) -> Header:
    """The header of an open index file; IndexUnusable when it is not an index of this
    blob as it is now (another size, another version, a short or foreign file)."""
    data = reader.read(0, HEADER.size)
    if len(data) != HEADER.size:
        raise IndexUnusable("short index file")
    magic, version, kind, flags, size, index_size, *fields = HEADER.unpack(data)
    if magic != MAGIC or version != VERSION:
        raise IndexUnusable("not an index of this version")
    if size != blob_size or index_size != reader.size or kind not in kinds:
        raise IndexUnusable("stale index")
    return Header(kind, flags, size, index_size, tuple(fields))
