"""Recordings that have not changed since their last ingest, told apart without reading
them (docs/recording.md#unchanged-files-are-not-read-again).

After a recording is ingested without an error, its IngestedFile row keeps the file's
device, inode, size and modification time, a digest of its first and last EDGE bytes, the
*shape* of the ingest (every importer's version, the promotion policy and the caps that
decide what is stored) and how many sessions came from it. The next ingest skips the file
when all of that still holds and those sessions are all still there: a stat, one small
read and two queries, instead of parsing it again.

Take the mark *before* reading the file: a write during the ingest then makes the next
mark differ, and the file is read again. `ingest --watch` uses the same marks, so a
change event that changed nothing (a file's attributes, a change the first pass already
read) does not ingest it again either.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from django.db.models import Count

from blobviewer.ingest.importers import OUR_FORMAT, importer_version
from blobviewer.ingest.importers.detect import IMPORTERS
from blobviewer.models import IngestedFile, Session

EDGE = 4096  # bytes read from each end of a file for its digest
PATH_CHARS = IngestedFile._meta.get_field("path").max_length


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
    if _key(path) is None:
        return None
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        with path.open("rb") as file:
            status = os.fstat(file.fileno())
            digest = hashlib.blake2b(file.read(EDGE), digest_size=16)
            if status.st_size > EDGE:
                file.seek(max(EDGE, status.st_size - EDGE))
                digest.update(file.read(EDGE))
    except OSError:
        return None
    return FileMark(
        status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, digest.hexdigest()
    )


def ingest_shape(*settings: object) -> str:
    """A digest of what shapes an ingest's result besides the file: every importer's
    version and *settings* (the promotion policy, the caps on records and search)."""
    versions = sorted((name, importer_version(name)) for name in [OUR_FORMAT, *IMPORTERS])
    return hashlib.blake2b(repr((versions, settings)).encode(), digest_size=16).hexdigest()


class Seen:
    """The marks of the recordings ingested under one *shape* (see the module)."""

    def __init__(self, shape: str) -> None:
        self.shape = shape

    key = staticmethod(file_mark)

    def unchanged(self, path: Path, mark: FileMark | None) -> bool:
        """Whether *path*, now *mark*, is as its last ingest left it, with every session
        that ingest made or added to still recorded."""
        key = _key(path)
        if mark is None or key is None:
            return False
        row = IngestedFile.objects.filter(path=key).first()
        if row is None or (row.shape, row.edges) != (self.shape, mark.edges):
            return False
        if (row.device, row.inode, row.size, row.mtime_ns) != (
            mark.device,
            mark.inode,
            mark.size,
            mark.mtime_ns,
        ):
            return False
        return row.sessions == _sessions_from(path)

    def remember(self, path: Path, mark: FileMark | None) -> None:
        """*path* was ingested without an error, as it was when *mark* was taken."""
        key = _key(path)
        if mark is None or key is None:
            return
        IngestedFile.objects.update_or_create(
            path=key,
            defaults={
                "device": mark.device,
                "inode": mark.inode,
                "size": mark.size,
                "mtime_ns": mark.mtime_ns,
                "edges": mark.edges,
                "shape": self.shape,
                "sessions": _sessions_from(path),
            },
        )

    def forget(self, path: Path) -> None:
        """Read *path* again next time, whatever it is like (its last ingest failed)."""
        if (key := _key(path)) is not None:
            IngestedFile.objects.filter(path=key).delete()


def _key(path: Path) -> str | None:
    """*path* as the marks name it; None for a path no column can hold (not UTF-8, or
    longer than a session's source path may be)."""
    key = str(path)
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return key if len(key) <= PATH_CHARS else None


def _sessions_from(path: Path) -> int:
    counted = Session.objects.filter(source_path=str(path)).aggregate(n=Count("pk"))
    return int(counted["n"])
