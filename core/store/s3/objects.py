"""S3Objects: the plain objects under one prefix of a bucket, by name (session logs,
derived files, listings), and what the blob store (core.store.s3.blob_store) is written on.

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
None (get, head, open) or nothing (delete). Objects appear whole or not at all (a PUT, or
a multipart upload completed at once).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.store.base import BlobKind
from core.store.errors import BlobIOError, BlobStoreError
from core.store.s3.client import (
    CONFLICT,
    NOT_FOUND,
    PRECONDITION,
    S3_SCHEME,
    Boto,
    answered,
    io_error,
    parse_s3_url,
)
from core.store.s3.reader import S3Reader

# A blob larger than this is uploaded in parts (S3 takes at most 5 GB in one PUT).
SINGLE_PUT_MAX = 256 * 1024 * 1024
PART_SIZE = 16 * 1024 * 1024
UPDATE_ATTEMPTS = 20


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
    """Objects under one prefix of one bucket, by name (this module's docstring shows how)."""

    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        Boto.load()
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")

    @classmethod
    def from_url(cls, url: str, *, client: Any = None, **config: Any) -> S3Objects:
        """The objects under ``s3://bucket/prefix``; *config* goes to botocore's Config."""
        bucket, prefix = parse_s3_url(url)
        return cls(client or Boto.client(**config), bucket, prefix)

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
        except Boto.errors as error:
            if answered(error, NOT_FOUND):
                return None
            raise io_error(f"cannot read {self._where(key)}", error) from None

    def head(self, name: str) -> ObjectInfo | None:
        """The object's size, ETag and time; None when there is none."""
        key = self.key(name)
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=key)
        except Boto.errors as error:
            if answered(error, NOT_FOUND):
                return None
            raise io_error(f"cannot read {self._where(key)}", error) from None
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
        except Boto.errors as error:
            raise io_error(f"cannot list {self._where(params['Prefix'])}", error) from None

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
        except Boto.errors as error:
            if not answered(error, NOT_FOUND):
                raise io_error(f"cannot delete {self._where(key)}", error) from None

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
                    with contextlib.suppress(*Boto.errors):
                        self.client.abort_multipart_upload(
                            Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                        )
                        aborted += 1
        except Boto.errors as error:
            raise io_error(f"cannot list the uploads of {self.url}", error) from None
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
            etag: str = self.client.put_object(**params).get("ETag", "")
            return etag
        except Boto.errors as error:
            if (if_none_match or if_match) and answered(error, PRECONDITION | CONFLICT):
                return None
            if if_match and answered(error, NOT_FOUND):
                return None
            raise io_error(f"cannot write {self._where(key)}", error) from None

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
        except Boto.errors as error:
            raise io_error(f"cannot write {self._where(key)}", error) from None
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
                etag: str = self.client.complete_multipart_upload(**complete).get("ETag", "")
            except Boto.errors as error:
                if (if_none_match or if_match) and answered(error, PRECONDITION | CONFLICT):
                    return None
                raise
            done = True
            return etag
        except Boto.errors as error:
            raise io_error(f"cannot write {self._where(key)}", error) from None
        finally:
            if not done:  # a refused or failed upload keeps no parts behind
                with contextlib.suppress(*Boto.errors):
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
