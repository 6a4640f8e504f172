"""S3BlobStore: blobs as objects in an S3-compatible bucket, and S3Objects, the plain
objects beside them (session logs, derived files).

Layout under ``s3://<bucket>/<prefix>``, as in the file store (SPEC 2.6):

- ``<prefix>/<id>.txt`` and ``<prefix>/<id>.json``: the blobs, byte for byte what
  FsBlobStore writes (core.store.encoding);
- ``<prefix>/.index/<id>.idx``: their indexes (core.store.index), caches like the files'.

Objects appear whole or not at all (a PUT, or a multipart upload completed at once), and a
blob never overwrites another: its PUT carries ``If-None-Match: *`` and the loser of a race
gets 412, which :meth:`S3BlobStore.put_sync` reports as False. Reads are HTTP Range GETs
(:class:`S3Reader`), so a selector reads what its index points at, never the whole object.

boto3 is imported when a store or an S3Objects is made, never by importing this module;
it reads ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` from the
environment, and ``AWS_REGION`` (or ``AWS_DEFAULT_REGION``) names the region. Every error of
the object store comes out as core.store.errors (BlobNotFound, BlobIOError with one line),
never as a botocore traceback.

S3Objects for other code (helper for session logs, derived files, bucket listings)::

    objects = S3Objects.from_url("s3://bucket/prefix/sessions")   # or store.objects("sessions")
    objects.get("<id>.jsonl")           # ObjectVersion(data, etag) or None
    objects.head("<id>.jsonl")          # ObjectInfo(name, size, etag, modified, metadata)
    objects.put(name, data)                         # -> ETag (replaces; metadata={...})
    objects.put(name, data, if_none_match=True)     # -> ETag, or None when it exists
    objects.put(name, data, if_match=etag)          # -> ETag, or None when it changed (412)
    objects.update(name, lambda old: (old or b"") + line)   # read, change, conditional
                                        # replace, retried on 412; -> the new ETag
    objects.append(name, data)          # update() that adds data at the end
    objects.put_stream(name, chunks, if_none_match=True)    # big ones, multipart
    objects.open(name)                  # S3Reader (range reads, blocks()) or None
    objects.list(start_after="x")       # ObjectInfo of every object below, in key order,
                                        # after the name "x" (a remembered marker)
    objects.delete(name)
    objects.abort_uploads(older_than=86400)   # stale multipart uploads; -> how many

Names are relative to the S3Objects' prefix, may contain "/" (sub-folders), and never
start with "/" or hold "." or ".." segments. Errors are BlobIOError; a missing object is
None (get, head, open) or nothing (delete).
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.content import Content
from core.store.base import BLOCK, AsyncTwins, BlobKind, BlobStat
from core.store.blob_id import BlobId, new_blob_id, parse_blob_id
from core.store.encoding import (
    JSON_SUFFIX,
    KINDS,
    SUFFIXES,
    TEXT_SUFFIX,
    decode_content,
    encode_content,
    index_of_stored,
)
from core.store.errors import BlobIOError, BlobNotFound, BlobStoreError, IndexUnusable
from core.store.index import INDEX_MIN_BYTES
from core.store.index.index_file import INDEX_FOLDER, INDEX_SUFFIX

__all__ = [
    "JSON_SUFFIX",
    "TEXT_SUFFIX",
    "ObjectInfo",
    "ObjectVersion",
    "S3BlobStore",
    "S3Objects",
    "S3Reader",
    "parse_s3_url",
]

S3_SCHEME = "s3://"
# Small reads (an index's header and records, a line or a key) are served from aligned
# pages of this size, kept per reader: a binary search over an index costs a few GETs.
PAGE = 64 * 1024
PAGES_KEPT = 32
# A blob larger than this is uploaded in parts (S3 takes at most 5 GB in one PUT).
SINGLE_PUT_MAX = 256 * 1024 * 1024
PART_SIZE = 16 * 1024 * 1024
UPDATE_ATTEMPTS = 20
# What a blob's object says it is (as the site's raw download says).
CONTENT_TYPES: dict[BlobKind, str] = {
    "text": "text/plain; charset=utf-8",
    "json": "application/json",
}
KIND_HINTS_KEPT = 4096
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_INDEX_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,200}$")  # as the file store's
_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
_PRECONDITION = {"412", "PreconditionFailed"}
_CONFLICT = {"409", "ConditionalRequestConflict"}  # AWS: a concurrent conditional write
_BAD_RANGE = {"416", "InvalidRange"}
_CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)


# -- boto3, imported on first use ---------------------------------------------------------


class _Boto:
    """boto3 and botocore's error classes, imported when the first client is made."""

    errors: tuple[type[Exception], ...] = ()
    client_error: type[Exception] = Exception

    @classmethod
    def load(cls) -> None:
        if not cls.errors:
            from botocore.exceptions import BotoCoreError, ClientError  # only S3 needs boto

            cls.client_error = ClientError
            cls.errors = (BotoCoreError, ClientError)

    # Making a client costs ~0.1 s (boto3 reads its models and config files): one per
    # process, endpoint, credentials and config is made and shared (clients are thread-safe).
    clients: dict[tuple[Any, ...], Any] = {}
    lock = threading.Lock()

    @classmethod
    def client(cls, endpoint_url: str | None = None, **config: Any) -> Any:
        cls.load()
        endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        key = (
            os.getpid(),
            endpoint_url,
            region,
            *(os.environ.get(name) for name in _CREDENTIAL_VARIABLES),
            repr(sorted(config.items())),
        )
        with cls.lock:
            client = cls.clients.get(key)
            if client is None:
                client = cls.clients[key] = cls._new_client(endpoint_url, region, config)
            return client

    @staticmethod
    def _new_client(endpoint_url: str | None, region: str | None, config: dict[str, Any]) -> Any:
        import boto3
        from botocore.config import Config

        settings: dict[str, Any] = {
            "max_pool_connections": 32,
            "retries": {"mode": "standard", "max_attempts": 3},
        }
        if endpoint_url:  # a self-hosted server: bucket names in the path, not in DNS
            settings["s3"] = {"addressing_style": "path"}
        settings.update(config)
        return boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region or "us-east-1",
            config=Config(**settings),
        )


def _code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _status(error: Exception) -> int:
    response = getattr(error, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _is(error: Exception, codes: set[str]) -> bool:
    """Whether the error is one of *codes*: by its S3 error code when it has one (a missing
    bucket is a 404 too, but not a missing object), else by its HTTP status (HEAD)."""
    code = _code(error)
    if code and not code.isdigit():
        return code in codes
    return str(_status(error)) in codes


def _io_error(action: str, error: Exception) -> BlobIOError:
    """One line that says what failed and what the object store answered."""
    if isinstance(error, _Boto.client_error):
        response = getattr(error, "response", {}) or {}
        message = response.get("Error", {}).get("Message") or ""
        said = f"{_code(error) or 'error'} (HTTP {_status(error)})"
        if message:
            said += f": {message}"
    else:
        said = str(error) or type(error).__name__
    return BlobIOError(" ".join(f"{action}: {said}".split()))


def parse_s3_url(url: str) -> tuple[str, str]:
    """The bucket and prefix of ``s3://bucket/prefix`` (prefix without edge slashes)."""
    if not isinstance(url, str) or not url.startswith(S3_SCHEME):
        raise BlobStoreError(f"not an S3 URL: {url!r} (expected s3://bucket/prefix)")
    bucket, _, prefix = url[len(S3_SCHEME) :].partition("/")
    if not _BUCKET.match(bucket):
        raise BlobStoreError(
            f"not an S3 bucket name: {bucket!r} in {url!r} "
            "(3 to 63 characters: lowercase letters, digits, dots and hyphens)"
        )
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise BlobStoreError(f"not an S3 prefix: {prefix!r} in {url!r}")
    return bucket, prefix


# -- plain objects ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    name: str  # relative to the S3Objects' prefix
    size: int
    etag: str
    modified: datetime | None
    # The object's user metadata (``x-amz-meta-*``, names in lower case): filled by head()
    # only, a listing does not carry it.
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ObjectVersion:
    data: bytes
    etag: str


class S3Objects:
    """Objects under one prefix of one bucket, by name (the module docstring shows how)."""

    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        _Boto.load()
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")

    @classmethod
    def from_url(cls, url: str, *, client: Any = None, **config: Any) -> S3Objects:
        """The objects under ``s3://bucket/prefix``; *config* goes to botocore's Config."""
        bucket, prefix = parse_s3_url(url)
        return cls(client or _Boto.client(**config), bucket, prefix)

    @property
    def url(self) -> str:
        return f"{S3_SCHEME}{self.bucket}/{self.prefix}" if self.prefix else S3_SCHEME + self.bucket

    def __repr__(self) -> str:
        return f"S3Objects({self.url!r})"

    def child(self, folder: str) -> S3Objects:
        """The objects under *folder* below this prefix (same client)."""
        return S3Objects(self.client, self.bucket, self.key(folder))

    def key(self, name: str) -> str:
        """The object key of *name*; BlobStoreError for a name that could leave the prefix."""
        if (
            not isinstance(name, str)
            or not name
            or name.startswith("/")
            or any(part in ("", ".", "..") for part in name.rstrip("/").split("/"))
        ):
            raise BlobStoreError(f"not an object name: {name!r}")
        return f"{self.prefix}/{name}" if self.prefix else name

    def _name(self, key: str) -> str:
        return key[len(self.prefix) + 1 :] if self.prefix else key

    # -- reads ----------------------------------------------------------------------------

    def get(self, name: str) -> ObjectVersion | None:
        """The object's bytes and ETag; None when there is none."""
        key = self.key(name)
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            with contextlib.closing(response["Body"]) as body:
                return ObjectVersion(body.read(), response.get("ETag", ""))
        except _Boto.errors as error:
            if _is(error, _NOT_FOUND):
                return None
            raise _io_error(f"cannot read {self._where(key)}", error) from None

    def head(self, name: str) -> ObjectInfo | None:
        """The object's size, ETag and time; None when there is none."""
        key = self.key(name)
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=key)
        except _Boto.errors as error:
            if _is(error, _NOT_FOUND):
                return None
            raise _io_error(f"cannot read {self._where(key)}", error) from None
        return ObjectInfo(
            name,
            response["ContentLength"],
            response.get("ETag", ""),
            response.get("LastModified"),
            dict(response.get("Metadata") or {}),
        )

    def open(
        self, name: str, kind: BlobKind = "text", *, is_index: bool = False
    ) -> S3Reader | None:
        """The object, open for range reads (one GET of its first page); None when missing."""
        return S3Reader.open(self, self.key(name), kind, is_index=is_index)

    def list(self, folder: str = "", *, start_after: str | None = None) -> Iterator[ObjectInfo]:
        """Every object below *folder* (all of them by default), in key order, after the
        name *start_after* when given (a marker remembered from an earlier listing)."""
        prefix = self.key(folder).rstrip("/") + "/" if folder else self._list_prefix()
        params: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        if start_after:
            params["StartAfter"] = self.key(start_after)
        yield from self._list(params)

    def _list_prefix(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""

    def _list(self, params: dict[str, Any]) -> Iterator[ObjectInfo]:
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(**params)
            for page in pages:
                for item in page.get("Contents", ()):
                    yield ObjectInfo(
                        self._name(item["Key"]),
                        item["Size"],
                        item.get("ETag", ""),
                        item.get("LastModified"),
                    )
        except _Boto.errors as error:
            raise _io_error(f"cannot list {self._where(params['Prefix'])}", error) from None

    # -- writes ---------------------------------------------------------------------------

    def put(
        self,
        name: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        content_type: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> str | None:
        """Write *data* as the object *name*, visible whole or not at all; its new ETag.
        With ``if_none_match`` only when there is none yet, with ``if_match`` only over the
        version that has that ETag: otherwise nothing is written and None is returned.
        *metadata*: the object's user metadata (ASCII names and values; head() reads it)."""
        return self._put(
            self.key(name),
            data,
            if_none_match=if_none_match,
            if_match=if_match,
            content_type=content_type,
            metadata=metadata,
        )

    def put_stream(
        self,
        name: str,
        chunks: Iterable[bytes],
        *,
        if_none_match: bool = False,
        content_type: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> str | None:
        """Like :meth:`put`, from *chunks* that are never held whole: a multipart upload
        (parts of PART_SIZE) completed at once, or aborted when anything fails."""
        key = self.key(name)
        parts = _parts(chunks, PART_SIZE)
        first = next(parts, b"")
        second = next(parts, None)
        if second is None:  # small: one PUT
            return self._put(
                key,
                first,
                if_none_match=if_none_match,
                content_type=content_type,
                metadata=metadata,
            )
        return self._multipart(
            key,
            _chain(first, second, parts),
            if_none_match=if_none_match,
            content_type=content_type,
            metadata=metadata,
        )

    def update(
        self,
        name: str,
        change: Callable[[bytes | None], bytes],
        *,
        attempts: int = UPDATE_ATTEMPTS,
    ) -> str:
        """Replace the object by ``change(old bytes or None)``, written only over the version
        read (``If-Match`` its ETag, ``If-None-Match: *`` when there was none) and tried again
        from a fresh read when another writer got there first (412); its new ETag. Two
        hosts appending to one log this way never lose a line."""
        for attempt in range(attempts):
            current = self.get(name)
            data = change(None if current is None else current.data)
            etag = self.put(
                name,
                data,
                if_none_match=current is None,
                if_match=None if current is None else current.etag,
            )
            if etag is not None:
                return etag
            time.sleep(min(0.005 * 2**attempt, 0.5))
        raise BlobIOError(
            f"cannot update {self._where(self.key(name))}: "
            f"other writers changed it {attempts} times in a row"
        )

    def append(self, name: str, data: bytes) -> str:
        """Add *data* at the end of the object (made when missing): :meth:`update`."""
        return self.update(name, lambda old: (old or b"") + data)

    def delete(self, name: str) -> None:
        """Delete the object; nothing happens when there is none."""
        key = self.key(name)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except _Boto.errors as error:
            if not _is(error, _NOT_FOUND):
                raise _io_error(f"cannot delete {self._where(key)}", error) from None

    def abort_uploads(self, *, older_than: float) -> int:
        """Abort the multipart uploads below this prefix started more than *older_than*
        seconds ago (a writer that died mid-upload); how many were aborted."""
        aborted = 0
        params: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self._list_prefix()}
        try:
            for page in self.client.get_paginator("list_multipart_uploads").paginate(**params):
                for upload in page.get("Uploads", ()):
                    started = upload.get("Initiated")
                    if started is not None and time.time() - started.timestamp() < older_than:
                        continue
                    with contextlib.suppress(*_Boto.errors):
                        self.client.abort_multipart_upload(
                            Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                        )
                        aborted += 1
        except _Boto.errors as error:
            raise _io_error(f"cannot list the uploads of {self.url}", error) from None
        return aborted

    # -- internals ------------------------------------------------------------------------

    def _where(self, key: str) -> str:
        return f"{S3_SCHEME}{self.bucket}/{key}"

    def _put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        content_type: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> str | None:
        if len(data) > SINGLE_PUT_MAX:
            view = memoryview(data)
            return self._multipart(
                key,
                (view[start : start + PART_SIZE] for start in range(0, len(data), PART_SIZE)),
                if_none_match=if_none_match,
                content_type=content_type,
                if_match=if_match,
                metadata=metadata,
            )
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "Body": data}
        if metadata:
            params["Metadata"] = metadata
        if if_none_match:
            params["IfNoneMatch"] = "*"
        if if_match:
            params["IfMatch"] = if_match
        if content_type:
            params["ContentType"] = content_type
        try:
            return self.client.put_object(**params).get("ETag", "")
        except _Boto.errors as error:
            if (if_none_match or if_match) and _is(error, _PRECONDITION | _CONFLICT):
                return None
            if if_match and _is(error, _NOT_FOUND):
                return None
            raise _io_error(f"cannot write {self._where(key)}", error) from None

    def _multipart(
        self,
        key: str,
        parts: Iterable[bytes | memoryview],
        *,
        if_none_match: bool,
        content_type: str | None,
        if_match: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> str | None:
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if content_type:
            params["ContentType"] = content_type
        if metadata:
            params["Metadata"] = metadata
        try:
            upload_id = self.client.create_multipart_upload(**params)["UploadId"]
        except _Boto.errors as error:
            raise _io_error(f"cannot write {self._where(key)}", error) from None
        done = False
        try:
            uploaded = []
            for number, part in enumerate(parts, start=1):
                response = self.client.upload_part(
                    Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=part
                )
                uploaded.append({"PartNumber": number, "ETag": response["ETag"]})
            complete: dict[str, Any] = {
                "Bucket": self.bucket,
                "Key": key,
                "UploadId": upload_id,
                "MultipartUpload": {"Parts": uploaded},
            }
            if if_none_match:
                complete["IfNoneMatch"] = "*"
            if if_match:
                complete["IfMatch"] = if_match
            try:
                etag = self.client.complete_multipart_upload(**complete).get("ETag", "")
            except _Boto.errors as error:
                if (if_none_match or if_match) and _is(error, _PRECONDITION | _CONFLICT):
                    return None
                raise
            done = True
            return etag
        except _Boto.errors as error:
            raise _io_error(f"cannot write {self._where(key)}", error) from None
        finally:
            if not done:  # a refused or failed upload keeps no parts behind
                with contextlib.suppress(*_Boto.errors):
                    self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=key, UploadId=upload_id
                    )


def _parts(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """*chunks* regrouped into parts of *size* bytes (the last one shorter)."""
    pending = bytearray()
    for chunk in chunks:
        pending += chunk
        while len(pending) >= size:
            yield bytes(pending[:size])
            del pending[:size]
    if pending:
        yield bytes(pending)


def _chain(first: bytes, second: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield second
    yield from rest


# -- positioned reads ---------------------------------------------------------------------


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
        except _Boto.errors as error:
            if _is(error, _NOT_FOUND):
                return None
            if not _is(error, _BAD_RANGE):
                raise _io_error(f"cannot read {objects._where(key)}", error) from None
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
                except _Boto.errors as error:
                    raise _io_error(f"cannot read {self._where()}", error) from None
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
                return body.read()
        except _Boto.errors as error:
            raise _io_error(f"cannot read {self._where()}", error) from None
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
            return self._objects.client.get_object(**params)
        except _Boto.errors as error:
            if self.is_index and _is(error, _PRECONDITION | _NOT_FOUND | _BAD_RANGE):
                raise IndexUnusable(f"{self._where()} changed while it was read") from None
            if _is(error, _NOT_FOUND | _PRECONDITION):
                raise BlobIOError(f"cannot read {self._where()}: it was deleted") from None
            raise _io_error(f"cannot read {self._where()}", error) from None


def _total_size(content_range: str | None, fallback: int) -> int:
    """The object's size from a ``Content-Range: bytes 0-65535/1234567`` header."""
    if content_range:
        _, _, total = content_range.rpartition("/")
        if total.isdigit():
            return int(total)
    return fallback


# -- the blob store -----------------------------------------------------------------------


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
        client = client or _Boto.client(endpoint_url, **config)
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
