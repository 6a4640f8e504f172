"""FsBlobStore, a flat directory of immutable blob files (the protocol: core.store.base).

Layout: `<id>.txt` holds a Text as UTF-8, `<id>.json` a Structured value as JSON.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from core.content import Content
from core.store.base import AsyncTwins, BlobKind, BlobStat, BlobStore
from core.store.blob_id import BlobId, new_blob_id, parse_blob_id
from core.store.encoding import (
    JSON_SUFFIX,
    TEXT_SUFFIX,
    decode_content,
    encode_content,
    index_of_stored,
)
from core.store.errors import BlobCorrupt, BlobIOError, BlobNotFound, BlobStoreError, InvalidBlobId
from core.store.file_reader import FileReader
from core.store.index import INDEX_MIN_BYTES
from core.store.index.index_file import can_write, index_files, index_path, write_index

__all__ = [
    "BlobCorrupt",
    "BlobIOError",
    "BlobNotFound",
    "BlobStore",
    "BlobStoreError",
    "FsBlobStore",
    "InvalidBlobId",
    "TEMP_PREFIX",
]

# A write starts as a file named `.tmp-<random>` in the store's directory and is renamed
# into place when complete (small blobs: see UNNAMED_MAX_BYTES). A process killed mid-write
# leaves that file behind; it is never a blob (blobs are named `<uuid>.txt` /
# `<uuid>.json`), so a cleaner may delete old ones (the site's `manage.py blobs gc` does).
TEMP_PREFIX = ".tmp-"
# Where the system has them (Linux: O_TMPFILE, linked into place through /proc), a blob of
# up to this many bytes is written as a file with no name at all, given its name once
# complete: about half the cost of creating a named file and renaming it, which counts when
# an ingest stores thousands of small blobs, and a killed writer leaves nothing. Bigger
# blobs keep a visible `.tmp-` file while they are written, which is what one looks for
# when a long write stops.
UNNAMED_MAX_BYTES = 1 << 20
_O_TMPFILE = getattr(os, "O_TMPFILE", 0)
_NO_UNNAMED_FILES = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOSYS})
# A link through /proc refused (a sandbox, a file system that links no such file).
_NO_LINKING = frozenset({errno.EPERM, errno.EACCES, errno.EXDEV, errno.EOPNOTSUPP})
_SUFFIX_OF_KIND: dict[str, str] = {"text": TEXT_SUFFIX, "json": JSON_SUFFIX}
_KINDS: tuple[BlobKind, BlobKind] = ("text", "json")  # in the order of _candidates' paths
# An index's name becomes part of a path: a blob id, or a name as plain as one.
_INDEX_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]*")


class FsBlobStore(AsyncTwins):
    """Blobs as files in one directory; async methods for agents, `_sync` twins for the rest.

    Writes go to a temporary file in the same directory (for a small blob, one without a
    name) that is renamed (linked) into place, so a crash never leaves a partial blob under
    a real name, and concurrent writers (threads or processes) never clash: every blob gets
    a fresh UUID v7 and its own temporary file. With ``fsync=True`` each blob is flushed to
    the disk before it gets its name, which also survives a power loss, at the cost of
    waiting for the disk.

    A blob of at least ``index_min_bytes`` gets its index (core.store.index) written beside it
    in `.index/` as it is stored, so readers find its lines, entries and keys without
    reading it whole. Failing to write an index never fails a store: it is a cache.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync: bool = False,
        index_min_bytes: int = INDEX_MIN_BYTES,
    ) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self.index_min_bytes = index_min_bytes
        self._unnamed_files = bool(_O_TMPFILE)  # until this folder turns out not to have them

    def __repr__(self) -> str:
        return f"FsBlobStore({str(self.root)!r})"

    def __str__(self) -> str:  # where it is, for messages
        return str(self.root)

    # -- sync twins ---------------------------------------------------------------------

    def store_sync(self, content: Content) -> BlobId:
        data, suffix = self._encode(content)
        blob_id = new_blob_id()
        self._write_atomically(self.root / f"{blob_id}{suffix}", data)
        self._write_index(blob_id, content, data)
        return blob_id

    def put_sync(self, blob_id: BlobId | str, content: Content) -> bool:
        """Store *content* under an id made elsewhere (a blob uploaded from another machine).

        Blobs are immutable: when the id is already stored, nothing is written and False is
        returned; otherwise the content is written atomically and True is returned.
        """
        blob_id = parse_blob_id(blob_id)
        if self.exists_sync(blob_id):
            return False
        data, suffix = self._encode(content)
        written = self._write_atomically(self.root / f"{blob_id}{suffix}", data, replace=False)
        if written:
            self._write_index(blob_id, content, data)
        return written

    def put_stream_sync(
        self, blob_id: BlobId | str, kind: BlobKind, chunks: Iterable[bytes]
    ) -> bool:
        """Store bytes already written as a blob of *kind* is kept, from *chunks* (never
        held whole); atomic, never clobbers: False when the id is already stored."""
        blob_id = parse_blob_id(blob_id)
        if kind not in _SUFFIX_OF_KIND:
            raise ValueError(f"a blob is text or json, not {kind!r}")
        if self.exists_sync(blob_id):
            return False
        path = self.root / f"{blob_id}{_SUFFIX_OF_KIND[kind]}"
        return self._write_atomically(path, chunks, replace=False)

    def load_sync(self, blob_id: BlobId | str) -> Content:
        path = self.path_of(blob_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobNotFound(f"blob {blob_id} not found") from None
        except OSError as error:
            raise BlobIOError(f"cannot read blob {blob_id}: {error.strerror}") from None
        return decode_content(blob_id, "text" if path.suffix == TEXT_SUFFIX else "json", data)

    def exists_sync(self, blob_id: BlobId | str) -> bool:
        blob_id = parse_blob_id(blob_id)
        return any(self._candidates(blob_id)[i].exists() for i in (0, 1))

    def path_of(self, blob_id: BlobId | str) -> Path:
        """The blob's file (`.txt` or `.json`); raises InvalidBlobId or BlobNotFound."""
        blob_id = parse_blob_id(blob_id)
        for path in self._candidates(blob_id):
            if path.exists():
                return path
        raise BlobNotFound(f"blob {blob_id} not found")

    def ids_sync(self) -> Iterator[BlobId]:
        """The ids of every blob in the store (in no particular order)."""
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return
        except OSError as error:
            raise BlobIOError(f"cannot list {self.root}: {error.strerror}") from None
        for entry in entries:
            stem, dot, suffix = entry.name.rpartition(".")
            if dot and f".{suffix}" in (TEXT_SUFFIX, JSON_SUFFIX):
                with contextlib.suppress(InvalidBlobId):
                    blob_id = parse_blob_id(stem)
                    if str(blob_id) == stem:  # only canonical names are blobs
                        yield blob_id

    def stat_sync(self, blob_id: BlobId | str) -> BlobStat:
        """The blob's kind and size in bytes."""
        blob_id = parse_blob_id(blob_id)
        for kind, path in zip(_KINDS, self._candidates(blob_id), strict=True):
            try:
                status = path.stat()
            except FileNotFoundError:
                continue
            except OSError as error:
                raise BlobIOError(f"cannot read blob {blob_id}: {error.strerror}") from None
            if stat.S_ISDIR(status.st_mode):  # as open_sync and load_sync find it
                raise BlobIOError(f"cannot read blob {blob_id}: {os.strerror(errno.EISDIR)}")
            return BlobStat(kind, status.st_size)
        raise BlobNotFound(f"blob {blob_id} not found")

    def size_sync(self, blob_id: BlobId | str) -> int:
        """Size of the blob's file in bytes."""
        return self.stat_sync(blob_id).size

    def open_sync(self, blob_id: BlobId | str) -> FileReader:
        """The blob's file, open for positioned reads (os.pread); the caller closes it."""
        blob_id = parse_blob_id(blob_id)
        for kind, path in zip(_KINDS, self._candidates(blob_id), strict=True):
            try:
                reader = FileReader(path, kind)
            except FileNotFoundError:
                continue
            except OSError as error:
                raise BlobIOError(f"cannot read blob {blob_id}: {error.strerror}") from None
            return reader
        raise BlobNotFound(f"blob {blob_id} not found")

    def discard_sync(self, blob_id: BlobId | str) -> None:
        """Remove a blob its writer has just stored in vain (e.g. the transaction that was
        to reference it failed), or one retention deletes. Blobs are immutable: this is
        not for editing. Nothing happens when it is gone already; BlobIOError when a file
        stays (the others still go)."""
        blob_id = parse_blob_id(blob_id)
        failed = [_unlinked(path) for path in self._candidates(blob_id)]
        failed.append(self._discard_index_files(str(blob_id)))
        if errors := [error for error in failed if error]:
            raise BlobIOError(f"cannot delete blob {blob_id}: {errors[0]}")

    # -- indexes: `.index/<name>.idx` (docs/store.md) ---------------------------------------

    def index_reader_sync(self, name: str) -> FileReader | None:
        """The index *name*, open for reading; None when it is missing or unreadable."""
        try:
            return FileReader(index_path(self.root, self._index_name(name)))
        except OSError:
            return None

    def index_put_sync(self, name: str, data: bytes) -> bool:
        """Write the index *name* atomically; False when the store cannot take it."""
        return write_index(self.root, self._index_name(name), data)

    def index_writable_sync(self) -> bool:
        return can_write(self.root)

    def index_discard_sync(self, name: str) -> None:
        if error := self._discard_index_files(name):
            raise BlobIOError(f"cannot delete the index {name}: {error}")

    def _discard_index_files(self, name: str) -> str:
        """Delete the index files of *name*; why one stays, or ""."""
        failed = [_unlinked(path) for path in index_files(self.root, self._index_name(name))]
        return next((error for error in failed if error), "")

    # -- internals ------------------------------------------------------------------------

    @staticmethod
    def _encode(content: Content) -> tuple[bytes, str]:
        data, kind = encode_content(content)  # the bytes every store keeps (core.store.encoding)
        return data, _SUFFIX_OF_KIND[kind]

    def _write_index(self, blob_id: BlobId, content: Content, data: bytes) -> None:
        # A cache: when it cannot be made here, readers make it from the blob if they need it.
        index = index_of_stored(content, data, min_bytes=self.index_min_bytes)
        if index is not None:
            self.index_put_sync(str(blob_id), index)

    @staticmethod
    def _index_name(name: str) -> str:
        if not _INDEX_NAME.fullmatch(name):
            raise ValueError(f"not an index name: {name!r}")
        return name

    def _candidates(self, blob_id: BlobId) -> tuple[Path, Path]:
        # Only a parsed UUID, rendered canonically, ever becomes part of a path.
        name = str(blob_id)
        return self.root / f"{name}{TEXT_SUFFIX}", self.root / f"{name}{JSON_SUFFIX}"

    def _write_atomically(
        self, path: Path, data: bytes | Iterable[bytes], *, replace: bool = True
    ) -> bool:
        """Write *data* (bytes, or chunks of them) under *path* atomically; with
        ``replace=False`` an existing file is kept (the link fails) and False is returned."""
        if self._unnamed_files and isinstance(data, bytes) and len(data) <= UNNAMED_MAX_BYTES:
            written = self._write_unnamed(path, data)
            # Written, or kept as it was; to replace a blob, or where this way failed,
            # the named temporary below.
            if written or (written is False and not replace):
                return written
        try:
            fd, temp_name = self._open_temp()
        except OSError as error:
            raise BlobIOError(f"cannot write to {self.root}: {error.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as file:
                chunks = (data,) if isinstance(data, bytes | bytearray | memoryview) else data
                for chunk in chunks:
                    file.write(chunk)
                if self.fsync:
                    file.flush()
                    os.fsync(file.fileno())
            if replace:
                os.replace(temp_name, path)
                return True
            try:
                os.link(temp_name, path)  # never clobbers: fails if the name exists
            except FileExistsError:
                return False
            finally:
                os.unlink(temp_name)
            return True
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.unlink(temp_name)
            if isinstance(error, OSError):
                raise BlobIOError(f"cannot write blob {path.name}: {error.strerror}") from None
            raise

    def _write_unnamed(self, path: Path, data: bytes) -> bool | None:
        """Write *data* to a file without a name, then link it as *path*: True, or False
        when *path* exists already (kept), or None when this system or folder cannot do
        it that way (the caller then writes a named temporary file)."""
        flags = _O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC
        try:
            fd = self._open_in_root(self.root, flags)
        except OSError as error:
            if error.errno in _NO_UNNAMED_FILES:  # not on this file system: never again
                self._unnamed_files = False
                return None
            raise BlobIOError(f"cannot write to {self.root}: {error.strerror}") from None
        try:
            return self._link_unnamed(fd, path, data)
        finally:
            os.close(fd)

    def _link_unnamed(self, fd: int, path: Path, data: bytes) -> bool | None:
        """_write_unnamed's work once the unnamed file *fd* is open."""
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self.fsync:
                os.fsync(fd)
        except OSError as error:
            raise BlobIOError(f"cannot write blob {path.name}: {error.strerror}") from None
        try:
            # Given a dir_fd (any: it is ignored for an absolute path), os.link calls
            # linkat, which follows /proc's link to the open file; link() would not.
            os.link(f"/proc/self/fd/{fd}", path, src_dir_fd=fd, follow_symlinks=True)
        except FileExistsError:
            return False
        except FileNotFoundError:  # the folder went away meanwhile, or there is no /proc
            self._unnamed_files = os.path.isdir("/proc/self/fd")
            return None
        except OSError as error:
            if error.errno in _NO_LINKING:
                self._unnamed_files = False
                return None
            raise BlobIOError(f"cannot write blob {path.name}: {error.strerror}") from None
        return True

    def _open_temp(self) -> tuple[int, str]:
        """A new file to write a blob into, as `tempfile.mkstemp` makes one (a random name
        that no other writer has, mode 0600) at a third of its cost: ingest writes
        thousands. The folder is made the first time it is missing."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        for _ in range(100):
            name = f"{self.root}/{TEMP_PREFIX}{secrets.token_hex(6)}"
            try:
                return self._open_in_root(name, flags), name
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "no unused temporary name")

    def _open_in_root(self, path: str | Path, flags: int) -> int:
        """os.open(path, flags, 0o600) in the store's folder, made first when it is missing."""
        try:
            return os.open(path, flags, 0o600)
        except FileNotFoundError:
            self.root.mkdir(parents=True, exist_ok=True)
            return os.open(path, flags, 0o600)


def _unlinked(path: Path) -> str:
    """Delete the file at *path* (gone already is fine); why it could not be, or ""."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as error:
        return str(error.strerror)
    return ""
