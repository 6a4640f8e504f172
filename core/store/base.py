"""The BlobStore protocol: what every store offers, so nothing outside core.store knows
which kind of store it has (a folder, an object store).

Readers never get a path: they ask the store for a blob's kind and size (:meth:`stat_sync`),
for positioned reads of it (:meth:`open_sync`, a :class:`BlobReader`), and for the
store's indexes of its blobs by name (docs/store.md: `.index/<id>.idx`), which readers of
core.store.index use and rebuild.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from core.content import Content
from core.store.blob_id import BlobId

__all__ = ["BLOCK", "AsyncTwins", "BlobKind", "BlobReader", "BlobStat", "BlobStore"]

BlobKind = Literal["text", "json"]

# The size of the blocks a streamed read yields unless asked otherwise.
BLOCK = 1 << 20


@runtime_checkable
class BlobReader(Protocol):
    """Positioned reads of one blob, or of one index object; the caller closes it (it is
    also a context manager). A reader of an index says ``kind == "text"``, meaninglessly."""

    kind: BlobKind
    size: int

    def read(self, offset: int, size: int) -> bytes:
        """*size* bytes at *offset*; fewer only at the end of the blob."""
        ...

    def exact(self, offset: int, size: int) -> bytes:
        """*size* bytes at *offset*; a short read raises core.store.errors.IndexUnusable
        (the blob or index is not what its reader expected)."""
        ...

    def blocks(self, start: int = 0, block: int = BLOCK) -> Iterator[bytes]:
        """The bytes from *start* to the end, streamed in blocks of at most *block* bytes
        (never empty ones), without holding the whole blob."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> BlobReader: ...

    def __exit__(self, *exc: object) -> None: ...


@dataclass(frozen=True, slots=True)
class BlobStat:
    kind: BlobKind
    size: int


@runtime_checkable
class BlobStore(Protocol):
    """Where blobs live. The async methods are for agents; the `_sync` twins for the rest.

    Errors derive from core.store.errors.BlobStoreError: InvalidBlobId before anything is
    touched, BlobNotFound, BlobCorrupt (a blob that does not read back as its kind) and
    BlobIOError (the storage refused). ``str(store)`` says where it is (a folder, an
    `s3://` URL), for messages.
    """

    # Blobs at least this large get an index when they are stored (core.store.index).
    index_min_bytes: int

    async def store(self, content: Content) -> BlobId: ...

    async def load(self, blob_id: BlobId | str) -> Content: ...

    async def exists(self, blob_id: BlobId | str) -> bool: ...

    def store_sync(self, content: Content) -> BlobId: ...

    def put_sync(self, blob_id: BlobId | str, content: Content) -> bool:
        """Store *content* under an id made elsewhere; never clobbers: False when the id
        is already stored."""
        ...

    def put_stream_sync(
        self, blob_id: BlobId | str, kind: BlobKind, chunks: Iterable[bytes]
    ) -> bool:
        """Store bytes already written as the store keeps a blob of *kind* (a text's UTF-8;
        JSON as dumps_for_storage writes it), streamed from *chunks* so that a big one is
        never held whole (the site's renderings of big JSON blobs). Visible whole or not at
        all; never clobbers: False when the id is already stored. No index is written."""
        ...

    def load_sync(self, blob_id: BlobId | str) -> Content: ...

    def exists_sync(self, blob_id: BlobId | str) -> bool: ...

    def stat_sync(self, blob_id: BlobId | str) -> BlobStat:
        """The blob's kind and size in bytes (BlobNotFound, InvalidBlobId, BlobIOError)."""
        ...

    def size_sync(self, blob_id: BlobId | str) -> int: ...

    def open_sync(self, blob_id: BlobId | str) -> BlobReader:
        """The blob, open for positioned reads; the caller closes it."""
        ...

    def ids_sync(self) -> Iterator[BlobId]:
        """The ids of every blob in the store, in no particular order."""
        ...

    def discard_sync(self, blob_id: BlobId | str) -> None:
        """Remove a blob (and its index); nothing happens when it is already gone."""
        ...

    # -- the store's indexes of its blobs, by name (`<id>`; docs/store.md) -------------

    def index_reader_sync(self, name: str) -> BlobReader | None:
        """The index *name*, open for reading; None when there is none."""
        ...

    def index_put_sync(self, name: str, data: bytes) -> bool:
        """Keep *data* as the index *name*, replacing any; False when it cannot be kept
        (a read-only store), which costs readers speed only."""
        ...

    def index_writable_sync(self) -> bool:
        """Whether an index could be kept (asked before building one that would be lost)."""
        ...

    def index_discard_sync(self, name: str) -> None:
        """Delete the index *name*, if there is one."""
        ...


class AsyncTwins:
    """The async methods of a store whose work is its `_sync` methods: each runs its twin
    in a worker thread, so an agent's event loop never waits on a disk or the network."""

    async def store(self: BlobStore, content: Content) -> BlobId:
        return await asyncio.to_thread(self.store_sync, content)

    async def load(self: BlobStore, blob_id: BlobId | str) -> Content:
        return await asyncio.to_thread(self.load_sync, blob_id)

    async def exists(self: BlobStore, blob_id: BlobId | str) -> bool:
        return await asyncio.to_thread(self.exists_sync, blob_id)
