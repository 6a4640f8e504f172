"""FileReader: the file store's BlobReader, positioned reads of one open file with
`os.pread`, never holding the whole file (core.store.fs opens blobs and indexes with it)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator

from core.store.base import BLOCK, BlobKind
from core.store.errors import IndexUnusable


class FileReader:
    """Positioned reads of one open file (a blob, or an index: ``kind`` is then "text").

    Raises OSError when the file cannot be opened; the store turns that into its errors.
    """

    __slots__ = ("fd", "kind", "size")

    def __init__(self, path: str | os.PathLike[str], kind: BlobKind = "text") -> None:
        self.kind = kind
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            status = os.fstat(self.fd)
            if stat.S_ISDIR(status.st_mode):  # Linux opens a folder; reading it fails later
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        except OSError:
            os.close(self.fd)
            raise
        self.size = status.st_size

    def read(self, offset: int, size: int) -> bytes:
        """*size* bytes at *offset* (fewer only at the end of the file)."""
        if size <= 0:
            return b""
        parts = []
        while size > 0:
            chunk = os.pread(self.fd, size, offset)
            if not chunk:
                break
            parts.append(chunk)
            offset += len(chunk)
            size -= len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def exact(self, offset: int, size: int) -> bytes:
        """Like :meth:`read`, but a short read means the file is not what was expected."""
        data = self.read(offset, size)
        if len(data) != size:
            raise IndexUnusable("a read went past the end of the file")
        return data

    def blocks(self, start: int = 0, block: int = BLOCK) -> Iterator[bytes]:
        """The file from *start* on, *block* bytes at a time (to its end as it is now)."""
        offset = max(start, 0)
        while chunk := self.read(offset, block):
            yield chunk
            offset += len(chunk)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:  # once: the number may belong to another file by the second call
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> FileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
