"""What a recording file is like, told without reading it whole: its *mark* (device,
inode, size, modification time and a digest of its first and last EDGE bytes), and the
*shape* of an ingest (what decides what is stored besides the file). The marks an ingest
keeps are blobviewer.ingest.unchanged's; plain Python, no Django here, so that an ingest
with nothing to do can tell before Django starts (blobviewer.ingest.quick_check)."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from blobviewer.ingest.importers import OUR_FORMAT, importer_version
from blobviewer.ingest.importers.detect import IMPORTERS

EDGE = 4096  # bytes read from each end of a file for its digest
PATH_CHARS = 1000  # the longest path a mark is kept for (IngestedFile.path)
# How much of a blob's text search indexes unless BLOBVIEWER_SEARCH_BLOB_BYTES says: part
# of an ingest's shape (blobviewer.search.indexing).
DEFAULT_BLOB_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class FileMark:
    device: int
    inode: int
    size: int
    mtime_ns: int
    edges: str


def file_mark(path: Path) -> FileMark | None:
    """What a recording file is like now; None for a folder (a conversation folder's
    files change, not the folder), a file that is gone or cannot be read, or one whose
    path the database cannot hold (then it is simply read every time)."""
    if path_key(path) is None:
        return None
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        with path.open("rb") as file:
            status = os.fstat(file.fileno())
            edges = edges_digest(file, status.st_size)
    except OSError:
        return None
    return FileMark(status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, edges)


def edges_digest(file: BinaryIO, end: int) -> str:
    """A digest of the first EDGE bytes of *file* and of the EDGE bytes before *end*."""
    file.seek(0)
    digest = hashlib.blake2b(file.read(min(EDGE, end)), digest_size=16)
    if end > EDGE:
        file.seek(max(EDGE, end - EDGE))
        digest.update(file.read(end - max(EDGE, end - EDGE)))
    return digest.hexdigest()


def prefix_digest(path: Path, offset: int) -> str | None:
    """edges_digest of *path* up to *offset*; None when it cannot be read or is shorter."""
    try:
        with path.open("rb") as file:
            if os.fstat(file.fileno()).st_size < offset:
                return None
            return edges_digest(file, offset)
    except OSError:
        return None


def ingest_shape(*settings: object) -> str:
    """A digest of what shapes an ingest's result besides the file: every importer's
    version and *settings* (the promotion policy, the caps on records and search)."""
    versions = sorted((name, importer_version(name)) for name in [OUR_FORMAT, *IMPORTERS])
    return hashlib.blake2b(repr((versions, settings)).encode(), digest_size=16).hexdigest()


def path_key(path: Path) -> str | None:
    """*path* as the marks name it; None for a path no column can hold (not UTF-8, or
    longer than a session's source path may be)."""
    key = str(path)
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return key if len(key) <= PATH_CHARS else None
