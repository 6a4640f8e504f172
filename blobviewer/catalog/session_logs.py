"""The session logs the site keeps (uploads: `POST /api/sessions`), wherever the blobs are.

Two kinds, picked by settings.BLOBVIEWER_BLOBS (see blobviewer.data_dir):

- FileSessionLogs: `<data>/sessions/<id>.jsonl`, one host's folder, replaced by a rename;
- ObjectSessionLogs: `<prefix>/sessions/<id>.jsonl` in the object store, which every host
  on the bucket sees. A log that grows is replaced only by a conditional write over the
  version that was read (`If-Match: <ETag>`, or `If-None-Match: *` when there was none),
  and when another host got there first (412) it is read and compared again, so two hosts
  appending to one log never lose a line.

Either way the rule is the same (:func:`compare_logs`): a log is replaced only by a longer
one that begins with the same bytes; an upload that is a prefix of the kept log (the same
log, or an older copy sent late) changes nothing; anything else is refused (LogDiverges,
the upload's 409) naming the first line that differs. Logs are streamed, never held whole
while compared.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from blobviewer.data_dir import blob_store, sessions_dir
from core.store.errors import BlobIOError, BlobStoreError
from core.store.s3 import (  # boto3 only when one is made
    ObjectInfo,
    S3BlobStore,
    S3Objects,
    S3Reader,
)

LOG_SUFFIX = ".jsonl"
_CHUNK = 1 << 20
# Conditional writes tried before an upload is answered "busy": each retry follows a
# write by another host, so this many in a row means a storm, not bad luck.
SAVE_ATTEMPTS = 20


class LogDiverges(Exception):
    """An upload would rewrite what was recorded; *line* is the first line that differs."""

    def __init__(self, session_id: uuid.UUID, line: int) -> None:
        super().__init__(
            f"line {line}: differs from session {session_id}'s log as already recorded; "
            "an upload may only add lines after the ones recorded"
        )
        self.line = line


class LogBusy(Exception):
    """Other writers replaced the log every time this one tried (SAVE_ATTEMPTS in a row)."""


@dataclass(frozen=True)
class LogCheck:
    """What :meth:`SessionLogs.check` found: whether the upload should replace the kept
    log, and the version of the kept log it was compared with (an ETag; "" for none)."""

    replace: bool
    version: str = ""


@dataclass(frozen=True)
class KeptLog:
    session_id: uuid.UUID
    size: int


class SessionLogs(Protocol):
    def location(self, session_id: uuid.UUID) -> str:
        """Where the log of *session_id* is kept: a path, or an `s3://` URL (what a
        Session's source_path records)."""
        ...

    def check(self, session_id: uuid.UUID, upload: Path) -> LogCheck:
        """Compare *upload* with the kept log (compare_logs); raises LogDiverges."""
        ...

    def save(self, session_id: uuid.UUID, upload: Path, check: LogCheck) -> bool:
        """Replace the kept log by *upload* when *check* said so and the log is still the
        version checked; otherwise check again against the log as it is now. Whether it
        was replaced; raises LogDiverges, LogBusy. *upload* may be moved."""
        ...

    def open(self, session_id: uuid.UUID) -> Iterator[bytes] | None:
        """The kept log's bytes, streamed in blocks; None when there is none."""
        ...

    def size(self, session_id: uuid.UUID) -> int | None:
        """The kept log's size in bytes; None when there is none."""
        ...

    def delete(self, session_id: uuid.UUID) -> int:
        """Delete the kept log; the bytes it held (0 when there was none)."""
        ...

    def kept(self) -> Iterator[KeptLog]:
        """Every kept log (named `<uuid>.jsonl`), in no particular order."""
        ...

    def put_new(self, session_id: uuid.UUID, blocks: Iterable[bytes]) -> bool:
        """Keep *blocks* as the log of *session_id* unless one is kept already (then
        False): for copying logs from one kind to another."""
        ...


def session_logs() -> SessionLogs:
    """The session logs of the site's store (settings.BLOBVIEWER_BLOBS)."""
    store = blob_store()
    if isinstance(store, S3BlobStore):
        return ObjectSessionLogs(store.objects("sessions"))
    return FileSessionLogs(sessions_dir())


# --- the rule ------------------------------------------------------------------------------


def compare_logs(kept: Iterable[bytes], upload: Iterable[bytes], *, session_id: uuid.UUID) -> bool:
    """Whether *upload* should replace the *kept* log, both given as blocks of bytes: True
    when the kept log is a byte prefix of the upload (the log grew); False when the upload
    is a byte prefix of the kept one (the same log, or an older copy sent late: a copy
    must never shorten it). Anything else would rewrite what was recorded: LogDiverges
    naming the first line that differs."""
    old_file, new_file = _Chunks(kept), _Chunks(upload)
    newlines = 0  # in the bytes that matched so far
    while True:
        old, new = old_file.read(_CHUNK), new_file.read(_CHUNK)
        if old == new:
            if not old:
                return False  # byte for byte the same
            newlines += old.count(b"\n")
            continue
        same = _common_prefix(old, new)
        if same == len(old):
            return True  # the kept log ended here; the upload goes on
        if same == len(new):
            return False  # the upload ended here; the kept log goes on
        raise LogDiverges(session_id, newlines + old.count(b"\n", 0, same) + 1)


class _Chunks:
    """Blocks of any size read back in chunks of exactly the size asked (fewer at the end)."""

    def __init__(self, blocks: Iterable[bytes]) -> None:
        self._blocks = iter(blocks)
        self._buffer = bytearray()

    def read(self, size: int) -> bytes:
        while len(self._buffer) < size:
            block = next(self._blocks, None)
            if block is None:
                break
            self._buffer += block
        chunk = bytes(self._buffer[:size])
        del self._buffer[:size]
        return chunk


def _common_prefix(a: bytes, b: bytes) -> int:
    """How many bytes *a* and *b* share at the start (at most one chunk each)."""
    limit = min(len(a), len(b))
    low, high = 0, limit  # a[:low] == b[:low], and the shared prefix is at most high
    while low < high:  # binary search: slices compare in C, byte loops do not
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def file_blocks(path: Path, *, block: int = _CHUNK) -> Iterator[bytes]:
    with path.open("rb") as file:
        while data := file.read(block):
            yield data


def _name(session_id: uuid.UUID) -> str:
    return f"{uuid.UUID(str(session_id))}{LOG_SUFFIX}"  # only a parsed UUID names a log


def _session_id(name: str) -> uuid.UUID | None:
    stem, suffix = name[: -len(LOG_SUFFIX)], name[-len(LOG_SUFFIX) :]
    if suffix != LOG_SUFFIX:
        return None
    try:
        session_id = uuid.UUID(stem)
    except ValueError:
        return None
    return session_id if str(session_id) == stem else None


# --- the data directory's sessions/ --------------------------------------------------------


class FileSessionLogs:
    """`<data>/sessions/<id>.jsonl`. Saving renames the upload into place: uploads of one
    session take turns on its database row (session_upload), so the check still holds."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, session_id: uuid.UUID) -> Path:
        return self.folder / _name(session_id)

    def location(self, session_id: uuid.UUID) -> str:
        return str(self.path(session_id))

    def check(self, session_id: uuid.UUID, upload: Path) -> LogCheck:
        try:
            kept = self.path(session_id).open("rb")
        except FileNotFoundError:
            return LogCheck(True)
        with kept:
            return LogCheck(
                compare_logs(_read_blocks(kept), file_blocks(upload), session_id=session_id)
            )

    def save(self, session_id: uuid.UUID, upload: Path, check: LogCheck) -> bool:
        if not check.replace:
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        os.replace(upload, self.path(session_id))
        return True

    def open(self, session_id: uuid.UUID) -> Iterator[bytes] | None:
        try:
            kept = self.path(session_id).open("rb")
        except FileNotFoundError:
            return None
        return _closing_blocks(kept)

    def size(self, session_id: uuid.UUID) -> int | None:
        try:
            return self.path(session_id).stat().st_size
        except FileNotFoundError:
            return None

    def delete(self, session_id: uuid.UUID) -> int:
        path = self.path(session_id)
        try:
            size = path.lstat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        return size

    def kept(self) -> Iterator[KeptLog]:
        try:
            entries = list(os.scandir(self.folder))
        except FileNotFoundError:
            return
        for entry in entries:
            session_id = _session_id(entry.name)
            if session_id is not None and entry.is_file(follow_symlinks=False):
                yield KeptLog(session_id, entry.stat(follow_symlinks=False).st_size)

    def put_new(self, session_id: uuid.UUID, blocks: Iterable[bytes]) -> bool:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=self.folder, prefix=".upload-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as file:
                for block in blocks:
                    file.write(block)
            try:
                os.link(temp, self.path(session_id))  # fails when one is kept: no clobber
            except FileExistsError:
                return False
            return True
        finally:
            Path(temp).unlink(missing_ok=True)


def _read_blocks(file: IO[bytes]) -> Iterator[bytes]:
    while data := file.read(_CHUNK):
        yield data


def _closing_blocks(file: IO[bytes]) -> Iterator[bytes]:
    with file:
        yield from _read_blocks(file)


# --- the object store's <prefix>/sessions/ -------------------------------------------------


class ObjectSessionLogs:
    """`<prefix>/sessions/<id>.jsonl` in the object store (core.store.s3.S3Objects), shared
    by every host on the bucket; replaced only by conditional writes (module docstring)."""

    def __init__(self, objects: S3Objects) -> None:
        self.objects = objects

    def location(self, session_id: uuid.UUID) -> str:
        return f"{self.objects.url}/{_name(session_id)}"

    def check(self, session_id: uuid.UUID, upload: Path) -> LogCheck:
        for _ in range(SAVE_ATTEMPTS):
            reader = self.objects.open(_name(session_id))
            if reader is None:
                return LogCheck(True)
            with reader:
                try:
                    replace = compare_logs(
                        reader.blocks(), file_blocks(upload), session_id=session_id
                    )
                except BlobIOError:
                    # Replaced by another host while it was read (each read names the
                    # version first seen): read it again, as it is now.
                    now = self.objects.head(_name(session_id))
                    if now is not None and now.etag == reader.etag:
                        raise  # not a new version: the store failed
                    continue
                return LogCheck(replace, reader.etag)
        raise LogBusy(f"session {session_id}'s log kept changing while it was read")

    def save(self, session_id: uuid.UUID, upload: Path, check: LogCheck) -> bool:
        data = upload.read_bytes()  # at most BLOBVIEWER_UPLOAD_MAX_BYTES
        for _ in range(SAVE_ATTEMPTS):
            if not check.replace:
                return False
            etag = self.objects.put(
                _name(session_id),
                data,
                if_none_match=not check.version,
                if_match=check.version or None,
            )
            if etag is not None:
                return True
            # Another host saved this log since it was read: compare again with theirs.
            check = self.check(session_id, upload)
        raise LogBusy(f"session {session_id}'s log was replaced by others {SAVE_ATTEMPTS} times")

    def open(self, session_id: uuid.UUID) -> Iterator[bytes] | None:
        reader = self.objects.open(_name(session_id))
        if reader is None:
            return None
        return self._blocks(session_id, reader)

    def _blocks(self, session_id: uuid.UUID, reader: S3Reader) -> Iterator[bytes]:
        """The log's blocks, of the version that is there when the first one is read (one
        replaced between opening and reading is opened again)."""
        for _ in range(SAVE_ATTEMPTS):
            with reader:
                blocks = reader.blocks()
                try:
                    first = next(blocks, None)
                except BlobIOError:
                    now = self.objects.head(_name(session_id))
                    if now is None or now.etag == reader.etag:
                        raise  # deleted, or the store failed
                    reopened = self.objects.open(_name(session_id))
                    if reopened is None:
                        return
                    reader = reopened
                    continue
                if first is not None:
                    yield first
                    yield from blocks
                return
        raise LogBusy(f"session {session_id}'s log kept changing while it was read")

    def size(self, session_id: uuid.UUID) -> int | None:
        info = self.objects.head(_name(session_id))
        return None if info is None else info.size

    def delete(self, session_id: uuid.UUID) -> int:
        size = self.size(session_id)
        if size is None:
            return 0
        self.objects.delete(_name(session_id))
        return size

    def kept(self) -> Iterator[KeptLog]:
        for info in self.objects.list():
            session_id = _session_id(info.name)
            if session_id is not None:
                yield KeptLog(session_id, info.size)

    def put_new(self, session_id: uuid.UUID, blocks: Iterable[bytes]) -> bool:
        etag = self.objects.put_stream(
            _name(session_id), blocks, if_none_match=True, content_type="application/x-ndjson"
        )
        return etag is not None


# --- copies of the recordings ingest read (object store only) ------------------------------
# `manage.py ingest` records a session from a file on one host; `ingest --rebuild` may run
# on another. With an object store, ingest keeps a copy of each session's recording beside
# the logs uploads keep, so any host can re-derive the session (blobviewer.ingest.kept_recordings
# says which bytes; the file store keeps nothing: the recording's path is read as before).

COPY_SUFFIX = ".recording"
COPY_LAYOUTS = ("file", "folder")  # the recording's bytes; a tar of a conversation folder
_COPY_ATTEMPTS = 3  # reads of a copy that another host replaced while it was read


@dataclass(frozen=True)
class RecordingCopy:
    """What a kept copy says of itself (the object's metadata): the recording's own file
    or folder name, how it is kept (COPY_LAYOUTS), and the SHA-256 of the object's bytes."""

    name: str
    layout: str
    sha256: str
    size: int


class KeptRecordings:
    """`<prefix>/sessions/<id>/<format>.recording`: the recording a session was ingested
    from, as ingest last read it (a file's bytes, a folder as a tar, or an evaluation
    output's line of that run). The original name travels in the object's metadata, so a
    re-derived session's meta (`source_name`) is the same from any host. Replaced whole
    (last ingest that added something wins: blobviewer.ingest.kept_recordings), never appended."""

    def __init__(self, objects: S3Objects) -> None:
        self.objects = objects

    @staticmethod
    def _name(session_id: uuid.UUID, source_format: str) -> str:
        if not source_format.replace("_", "").isalnum():
            raise BlobStoreError(f"not a recording format: {source_format!r}")
        return f"{uuid.UUID(str(session_id))}/{source_format}{COPY_SUFFIX}"

    def location(self, session_id: uuid.UUID, source_format: str) -> str:
        return f"{self.objects.url}/{self._name(session_id, source_format)}"

    def info(self, session_id: uuid.UUID, source_format: str) -> RecordingCopy | None:
        """The kept copy's name, layout and digest; None when there is none (or the object
        there is not one ingest wrote)."""
        head = self.objects.head(self._name(session_id, source_format))
        if head is None:
            return None
        meta = head.metadata
        layout, digest = meta.get("layout", ""), meta.get("sha256", "")
        name = urllib.parse.unquote(meta.get("source-name", ""))
        if layout not in COPY_LAYOUTS or len(digest) != 64 or not _plain_name(name):
            return None
        return RecordingCopy(name, layout, digest, head.size)

    def keep(
        self, session_id: uuid.UUID, source_format: str, data: bytes, *, name: str, layout: str
    ) -> RecordingCopy:
        """Keep *data* as the copy of the session's recording (replacing the one kept)."""
        if layout not in COPY_LAYOUTS or not _plain_name(name):
            raise BlobStoreError(f"not a recording's name: {name!r}")
        copy = RecordingCopy(name, layout, hashlib.sha256(data).hexdigest(), len(data))
        self.objects.put(
            self._name(session_id, source_format),
            data,
            content_type="application/x-tar" if layout == "folder" else None,
            # S3 metadata is ASCII: the name is percent-encoded (a file name may be any text).
            metadata={
                "source-name": urllib.parse.quote(name, safe=""),
                "layout": layout,
                "sha256": copy.sha256,
            },
        )
        return copy

    def read(self, session_id: uuid.UUID, source_format: str) -> tuple[RecordingCopy, bytes] | None:
        """The kept copy and its bytes, checked against its digest (a copy replaced while
        it was read is read again); None when there is none."""
        name = self._name(session_id, source_format)
        for _ in range(_COPY_ATTEMPTS):
            copy = self.info(session_id, source_format)
            if copy is None:
                return None
            version = self.objects.get(name)
            if version is None:
                return None
            if hashlib.sha256(version.data).hexdigest() == copy.sha256:
                return copy, version.data
        raise BlobIOError(
            f"{self.objects.url}/{name}: its bytes do not match its digest "
            f"({_COPY_ATTEMPTS} reads); ingest the recording again to keep a new copy"
        )

    def kept(self, session_id: uuid.UUID) -> list[ObjectInfo]:
        """Every object kept for the session (`<id>/…`: one copy per format)."""
        return list(self.objects.list(str(uuid.UUID(str(session_id)))))

    def delete(self, session_id: uuid.UUID) -> int:
        """Delete every copy kept for the session; the bytes they held."""
        freed = 0
        for info in self.kept(session_id):
            self.objects.delete(info.name)
            freed += info.size
        return freed


def kept_recordings() -> KeptRecordings | None:
    """The copies of ingested recordings in the site's object store; None on the file
    store (which keeps none: a recording is read from its own path)."""
    store = blob_store()
    if isinstance(store, S3BlobStore):
        return KeptRecordings(store.objects("sessions"))
    return None


def _plain_name(name: str) -> bool:
    """A file or folder name that stays inside the folder it is written to."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name
