"""S3BlobStore: blobs as objects in an S3-compatible bucket (the protocol:
core.store.base), laid out under ``s3://<bucket>/<prefix>`` as the file store lays out
its folder (docs/store.md):

- ``<prefix>/<id>.txt`` and ``<prefix>/<id>.json``: the blobs, byte for byte what
  FsBlobStore writes (core.store.encoding);
- ``<prefix>/.index/<id>.idx``: their blob indexes (core.store.index), caches like the files'.

A blob never overwrites another: its PUT carries ``If-None-Match: *`` and the loser of a
race gets 412, which :meth:`S3BlobStore.put_sync` reports as False.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from typing import Any

from core.content import Content
from core.store.base import AsyncTwins, BlobKind, BlobStat
from core.store.blob_id import BlobId, new_blob_id, parse_blob_id
from core.store.encoding import KINDS, SUFFIXES, decode_content, encode_content, index_of_stored
from core.store.errors import BlobIOError, BlobNotFound, BlobStoreError, StoreUnavailable
from core.store.index import INDEX_MIN_BYTES
from core.store.index.index_file import INDEX_FOLDER, INDEX_SUFFIX
from core.store.s3.client import Boto, parse_s3_url
from core.store.s3.objects import S3Objects
from core.store.s3.reader import S3Reader

# What a blob's object says it is (as the site's raw download says).
CONTENT_TYPES: dict[BlobKind, str] = {
    "text": "text/plain; charset=utf-8",
    "json": "application/json",
}
KIND_HINTS_KEPT = 4096
_INDEX_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,200}$")  # as the file store's


class S3BlobStore(AsyncTwins):
    """Blobs as objects `<prefix>/<id>.txt` / `<prefix>/<id>.json` in an S3 bucket; async
    methods for agents (a thread each, as FsBlobStore), `_sync` twins for the rest.

    A blob of at least ``index_min_bytes`` gets its index (core.store.index) put under
    `<prefix>/.index/` as it is stored; failing to put one never fails a store.
    """

    def __init__(self, objects: S3Objects, *, index_min_bytes: int = INDEX_MIN_BYTES) -> None:
        self.objects_root = objects
        self.index_min_bytes = index_min_bytes
        self._indexes = objects.child(INDEX_FOLDER)
        # Which suffix an id has, as last seen: a hint tried first (blobs never change kind
        # but may be discarded), so most reads need one request, not two.
        self._kinds: dict[BlobId, BlobKind] = {}
        self._index_refused = False

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        index_min_bytes: int = INDEX_MIN_BYTES,
        fsync: bool = False,
        client: Any = None,
        endpoint_url: str | None = None,
        **config: Any,
    ) -> S3BlobStore:
        """The store at ``s3://bucket/prefix``. The client comes from the environment
        (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION) unless
        *client* is given; *config* goes to botocore's Config. *fsync* is accepted for
        FsBlobStore's sake and means nothing here: an object is durable once acknowledged."""
        del fsync
        bucket, prefix = parse_s3_url(url)
        client = client or Boto.client(endpoint_url, **config)
        return cls(S3Objects(client, bucket, prefix), index_min_bytes=index_min_bytes)

    @property
    def url(self) -> str:
        return self.objects_root.url

    @property
    def client(self) -> Any:
        return self.objects_root.client

    def __repr__(self) -> str:
        return f"S3BlobStore({self.url!r})"

    def __str__(self) -> str:  # where it is, for messages
        return self.url

    def objects(self, folder: str) -> S3Objects:
        """Plain objects under `<prefix>/<folder>/` (e.g. ``"sessions"``), beside the blobs."""
        return self.objects_root.child(folder)

    # -- sync twins -----------------------------------------------------------------------

    def store_sync(self, content: Content) -> BlobId:
        data, kind = encode_content(content)
        blob_id = new_blob_id()
        if not self._put_new(blob_id, kind, data):
            raise BlobIOError(f"cannot write blob {blob_id}: its new id is taken")
        self._remember(blob_id, kind)
        self._put_index(blob_id, content, data)
        return blob_id

    def put_sync(self, blob_id: BlobId | str, content: Content) -> bool:
        """Store *content* under an id made elsewhere; never clobbers: False when the id is
        stored already (also when another writer wins the conditional PUT)."""
        blob_id = parse_blob_id(blob_id)
        data, kind = encode_content(content)
        if self.exists_sync(blob_id):
            return False
        if not self._put_new(blob_id, kind, data):
            return False
        self._remember(blob_id, kind)
        self._put_index(blob_id, content, data)
        return True

    def put_stream_sync(
        self, blob_id: BlobId | str, kind: BlobKind, chunks: Iterable[bytes]
    ) -> bool:
        """Store bytes already encoded as a blob of *kind*, streamed (never held whole);
        never clobbers. No index is written."""
        blob_id = parse_blob_id(blob_id)
        if kind not in SUFFIXES:
            raise BlobStoreError(f"a blob's kind is text or json, not {kind!r}")
        if self.exists_sync(blob_id):
            return False
        key = self._name(blob_id, kind)
        written = self.objects_root.put_stream(
            key, chunks, if_none_match=True, content_type=CONTENT_TYPES[kind]
        )
        if written is None:
            return False
        self._remember(blob_id, kind)
        return True

    def load_sync(self, blob_id: BlobId | str) -> Content:
        blob_id = parse_blob_id(blob_id)
        for kind in self._kind_order(blob_id):
            found = self.objects_root.get(self._name(blob_id, kind))
            if found is not None:
                self._remember(blob_id, kind)
                return decode_content(blob_id, kind, found.data)
        raise BlobNotFound(f"blob {blob_id} not found")

    def exists_sync(self, blob_id: BlobId | str) -> bool:
        blob_id = parse_blob_id(blob_id)
        return self._stat(blob_id) is not None

    def stat_sync(self, blob_id: BlobId | str) -> BlobStat:
        blob_id = parse_blob_id(blob_id)
        stat = self._stat(blob_id)
        if stat is None:
            raise BlobNotFound(f"blob {blob_id} not found")
        return stat

    def size_sync(self, blob_id: BlobId | str) -> int:
        return self.stat_sync(blob_id).size

    def open_sync(self, blob_id: BlobId | str) -> S3Reader:
        blob_id = parse_blob_id(blob_id)
        for kind in self._kind_order(blob_id):
            # A HEAD, not a GET of the first page: on a big object SeaweedFS answers it
            # in a third of the time, and a selector deep in the blob never reads page 0.
            info = self.objects_root.head(self._name(blob_id, kind))
            if info is not None:
                self._remember(blob_id, kind)
                key = self.objects_root.key(info.name)
                return S3Reader(self.objects_root, key, kind, info.size, info.etag)
        raise BlobNotFound(f"blob {blob_id} not found")

    def ids_sync(self) -> Iterator[BlobId]:
        """The ids of every blob under the prefix (not in sub-folders: `.index/`, ...)."""
        prefix = self.objects_root._list_prefix()
        params = {"Bucket": self.objects_root.bucket, "Prefix": prefix, "Delimiter": "/"}
        for info in self.objects_root._list(params):
            stem, dot, suffix = info.name.rpartition(".")
            kind = KINDS.get(f"{dot}{suffix}")
            if kind is None:
                continue
            with contextlib.suppress(BlobStoreError):
                blob_id = parse_blob_id(stem)
                if str(blob_id) == stem:  # only canonical names are blobs
                    self._remember(blob_id, kind)
                    yield blob_id

    def discard_sync(self, blob_id: BlobId | str) -> None:
        blob_id = parse_blob_id(blob_id)
        for kind in SUFFIXES:
            self.objects_root.delete(self._name(blob_id, kind))
        self._kinds.pop(blob_id, None)
        self.index_discard_sync(str(blob_id))

    # -- the store's indexes --------------------------------------------------------------

    def index_reader_sync(self, name: str) -> S3Reader | None:
        if not _INDEX_NAME.match(name):
            return None
        return self._indexes.open(f"{name}{INDEX_SUFFIX}", is_index=True)

    def index_put_sync(self, name: str, data: bytes) -> bool:
        if not _INDEX_NAME.match(name):
            return False
        try:
            self._indexes.put(f"{name}{INDEX_SUFFIX}", bytes(data))
        except StoreUnavailable:
            return False  # not a refusal: the next one may be written
        except BlobIOError:
            self._index_refused = True  # read-only credentials: stop building them
            return False
        return True

    def index_writable_sync(self) -> bool:
        return not self._index_refused

    def index_discard_sync(self, name: str) -> None:
        if _INDEX_NAME.match(name):
            self._indexes.delete(f"{name}{INDEX_SUFFIX}")

    # -- internals ------------------------------------------------------------------------

    @staticmethod
    def _name(blob_id: BlobId, kind: BlobKind) -> str:
        # Only a parsed UUID, rendered canonically, ever becomes part of a key.
        return f"{blob_id}{SUFFIXES[kind]}"

    def _key(self, blob_id: BlobId, kind: BlobKind) -> str:
        return self.objects_root.key(self._name(blob_id, kind))

    def _kind_order(self, blob_id: BlobId) -> tuple[BlobKind, BlobKind]:
        return ("json", "text") if self._kinds.get(blob_id) == "json" else ("text", "json")

    def _remember(self, blob_id: BlobId, kind: BlobKind) -> None:
        if len(self._kinds) >= KIND_HINTS_KEPT:
            self._kinds.clear()
        self._kinds[blob_id] = kind

    def _stat(self, blob_id: BlobId) -> BlobStat | None:
        for kind in self._kind_order(blob_id):
            info = self.objects_root.head(self._name(blob_id, kind))
            if info is not None:
                self._remember(blob_id, kind)
                return BlobStat(kind, info.size)
        return None

    def _put_new(self, blob_id: BlobId, kind: BlobKind, data: bytes) -> bool:
        """PUT the blob's object with If-None-Match: *; False when one is there already."""
        key = self._key(blob_id, kind)
        # bytes() of bytes is the same object; a promoted JSON's bytearray is copied once.
        written = self.objects_root._put(
            key, bytes(data), if_none_match=True, content_type=CONTENT_TYPES[kind]
        )
        return written is not None

    def _put_index(self, blob_id: BlobId, content: Content, data: bytes) -> None:
        index = index_of_stored(content, data, min_bytes=self.index_min_bytes)
        if index is not None:
            self.index_put_sync(str(blob_id), index)
