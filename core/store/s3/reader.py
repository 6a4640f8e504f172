"""S3Reader: the object store's BlobReader, positioned reads of one object by HTTP Range
GETs, so a selector reads what a blob's index points at, never the whole object.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from core.store.base import BLOCK, BlobKind
from core.store.errors import BlobIOError, IndexUnusable
from core.store.s3.client import BAD_RANGE, NOT_FOUND, PRECONDITION, Boto, answered, io_error

if TYPE_CHECKING:
    from core.store.s3.objects import S3Objects

# Small reads (an index's header and records, a line or a key) are served from aligned
# pages of this size, kept per reader: a binary search over an index costs a few GETs.
PAGE = 64 * 1024
PAGES_KEPT = 32


class S3Reader:
    """A BlobReader over one object: HTTP Range GETs, small reads served from a few cached
    pages, :meth:`blocks` one streamed GET. Objects are immutable (blobs) or replaced whole
    (indexes): each GET names the ETag first seen, so a replaced index reads as unusable
    rather than as a mix of two versions."""

    __slots__ = ("_lock", "_objects", "_pages", "etag", "is_index", "key", "kind", "size")

    def __init__(
        self,
        objects: S3Objects,
        key: str,
        kind: BlobKind,
        size: int,
        etag: str,
        *,
        first_page: bytes | None = None,
        is_index: bool = False,
    ) -> None:
        self._objects = objects
        self.key = key
        self.kind = kind
        self.size = size
        self.etag = etag
        self.is_index = is_index
        self._pages: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        self._lock = threading.Lock()
        if first_page is not None:
            self._pages[0] = first_page

    @classmethod
    def open(
        cls, objects: S3Objects, key: str, kind: BlobKind, *, is_index: bool = False
    ) -> S3Reader | None:
        """The object at *key*, its first page read with its size; None when missing."""
        client, bucket = objects.client, objects.bucket
        try:
            response = client.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{PAGE - 1}")
            with contextlib.closing(response["Body"]) as body:
                page = body.read()
        except Boto.errors as error:
            if answered(error, NOT_FOUND):
                return None
            if not answered(error, BAD_RANGE):
                raise io_error(f"cannot read {objects._where(key)}", error) from None
            # An empty object has no byte 0 to read.
            info = objects.head(objects._name(key))
            if info is None:
                return None
            return cls(objects, key, kind, info.size, info.etag, first_page=b"", is_index=is_index)
        size = _total_size(response.get("ContentRange"), len(page))
        return cls(
            objects, key, kind, size, response.get("ETag", ""), first_page=page, is_index=is_index
        )

    def read(self, offset: int, size: int) -> bytes:
        """*size* bytes at *offset* (fewer only at the end of the object)."""
        offset = max(offset, 0)
        end = min(offset + max(size, 0), self.size)
        if end <= offset:
            return b""
        first, last = offset // PAGE, (end - 1) // PAGE
        if last - first <= 1 and end - offset <= PAGE:
            data = b"".join(self._page(number) for number in range(first, last + 1))
            start = offset - first * PAGE
            return data[start : start + end - offset]
        return self._get(offset, end)

    def exact(self, offset: int, size: int) -> bytes:
        """Like :meth:`read`, but a short read means the object is not what was expected."""
        data = self.read(offset, size)
        if len(data) != size:
            raise IndexUnusable("a read went past the end of the object")
        return data

    def blocks(self, start: int = 0, block: int = BLOCK) -> Iterator[bytes]:
        """The object from *start* to its end in blocks of at most *block* bytes, from one
        streamed GET (never held whole)."""
        start = max(start, 0)
        if start >= self.size:
            return
        response = self._request(start, self.size)
        body = response["Body"]
        try:
            while True:
                try:
                    chunk = body.read(block)
                except Boto.errors as error:
                    raise io_error(f"cannot read {self._where()}", error) from None
                except OSError as error:  # the connection broke mid-body
                    raise BlobIOError(f"cannot read {self._where()}: {error}") from None
                if not chunk:
                    return
                yield chunk
        finally:
            body.close()

    def close(self) -> None:
        self._pages.clear()

    def __enter__(self) -> S3Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"S3Reader({self._where()!r}, size={self.size})"

    # -- internals ------------------------------------------------------------------------

    def _where(self) -> str:
        return self._objects._where(self.key)

    def _page(self, number: int) -> bytes:
        with self._lock:
            page = self._pages.get(number)
            if page is not None:
                self._pages.move_to_end(number)
                return page
        start = number * PAGE
        page = self._get(start, min(start + PAGE, self.size))
        with self._lock:
            self._pages[number] = page
            while len(self._pages) > PAGES_KEPT:
                self._pages.popitem(last=False)
        return page

    def _get(self, start: int, end: int) -> bytes:
        response = self._request(start, end)
        try:
            with contextlib.closing(response["Body"]) as body:
                data: bytes = body.read()
                return data
        except Boto.errors as error:
            raise io_error(f"cannot read {self._where()}", error) from None
        except OSError as error:
            raise BlobIOError(f"cannot read {self._where()}: {error}") from None

    def _request(self, start: int, end: int) -> dict[str, Any]:
        params: dict[str, Any] = {
            "Bucket": self._objects.bucket,
            "Key": self.key,
            "Range": f"bytes={start}-{end - 1}",
        }
        if self.etag:
            params["IfMatch"] = self.etag
        try:
            response: dict[str, Any] = self._objects.client.get_object(**params)
            return response
        except Boto.errors as error:
            if self.is_index and answered(error, PRECONDITION | NOT_FOUND | BAD_RANGE):
                raise IndexUnusable(f"{self._where()} changed while it was read") from None
            if answered(error, NOT_FOUND | PRECONDITION):
                raise BlobIOError(f"cannot read {self._where()}: it was deleted") from None
            raise io_error(f"cannot read {self._where()}", error) from None


def _total_size(content_range: str | None, fallback: int) -> int:
    """The object's size from a ``Content-Range: bytes 0-65535/1234567`` header."""
    if content_range:
        _, _, total = content_range.rpartition("/")
        if total.isdigit():
            return int(total)
    return fallback
