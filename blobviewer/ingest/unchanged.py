"""Recordings that have not changed since their last ingest, told apart without reading
them (docs/recording.md#unchanged-files-are-not-read-again).

After a recording is ingested without an error, its IngestedFile row keeps the file's
device, inode, size and modification time, a digest of its first and last EDGE bytes, the
*shape* of the ingest (every importer's version, the promotion policy and the caps that
decide what is stored) and how many sessions came from it. The next ingest skips the file
when all of that still holds and those sessions are all still there: a stat, one small
read and two queries, instead of parsing it again.

A JSON Lines recording read a line at a time (our own session log, Claude Code, Codex)
also keeps where its last whole line ended and a digest of what came before that point
(*prefix*), so a file that has only grown since (the same inode, that prefix unchanged)
is read from there on: its first line, then only the new lines. Our log's records do not
depend on each other; another agent's do (a result names its call, later lines add to a
message's tokens), so its importer's state after that line is kept too, as the carry the
resumed read starts from (importers.recording.Carried).

Take the mark *before* reading the file: a write during the ingest then makes the next
mark differ, and the file is read again. `ingest --watch` uses the same marks, so a
change event that changed nothing (a file's attributes, a change the first pass already
read) does not ingest it again either.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db.models import Count

from blobviewer.ingest.importers import OUR_FORMAT
from blobviewer.ingest.marks import FileMark, file_mark, path_key, prefix_digest
from blobviewer.ingest.recording_files import ReadState
from blobviewer.models import IngestedFile, Session


class Unchanged:
    """The verdict on a file as its last ingest left it."""


UNCHANGED = Unchanged()


@dataclass(frozen=True)
class Grown:
    """The verdict on a recording that has only grown: read on from *offset*, the end of
    line *lines*, with what the last read carried over (None for our own log)."""

    offset: int
    lines: int
    carry: dict[str, Any] | None = None


class Seen:
    """The marks of the recordings ingested under one *shape* (see the module). *fresh*:
    read every file (a rebuild, --force); *whole*: never resume (a copy is kept whole)."""

    def __init__(self, shape: str, *, fresh: bool = False, whole: bool = False) -> None:
        self.shape, self.fresh, self.whole = shape, fresh, whole

    key = staticmethod(file_mark)

    def verdict(self, path: Path, mark: FileMark | None) -> Unchanged | Grown | None:
        """UNCHANGED when *path*, now *mark*, is as its last ingest left it, with every
        session that ingest made or added to still recorded; Grown when it has only grown
        since and its last read can be resumed; None when it is to be read whole."""
        key = path_key(path)
        if mark is None or key is None:
            return None
        row = IngestedFile.objects.filter(path=key).first()
        if row is None or row.shape != self.shape:
            return None
        same_file = (row.device, row.inode) == (mark.device, mark.inode)
        verdict: Unchanged | Grown | None = None
        if same_file and (row.size, row.mtime_ns, row.edges) == (
            mark.size,
            mark.mtime_ns,
            mark.edges,
        ):
            verdict = UNCHANGED
        elif (
            same_file
            and (row.format == OUR_FORMAT or row.carry is not None)
            and row.offset
            and mark.size >= row.offset
            and prefix_digest(path, row.offset) == row.prefix
        ):
            verdict = Grown(row.offset, row.lines, row.carry)
        # Last, as it costs a query: a session deleted since is made again from the file.
        return verdict if verdict and row.sessions == _sessions_from(path) else None

    def unchanged(self, path: Path, mark: FileMark | None) -> bool:
        return self.verdict(path, mark) is UNCHANGED

    def plan(self, path: Path, mark: FileMark | None) -> ReadState | None:
        """How to read *path*: None when it is not to be read (unchanged), else a
        ReadState, resuming where a grown recording's last read ended."""
        verdict = None if self.fresh else self.verdict(path, mark)
        if verdict is UNCHANGED:
            return None
        if isinstance(verdict, Grown) and not self.whole:
            return ReadState(resume=(verdict.offset, verdict.lines), carry=verdict.carry)
        return ReadState()

    def remember(self, path: Path, mark: FileMark | None, read: ReadState | None = None) -> None:
        """*path* was ingested without an error, as it was when *mark* was taken; *read*
        says how far a line-by-line read went, and what it carries over."""
        key = path_key(path)
        if mark is None or key is None:
            return
        # Only a line-by-line read that can be resumed says where it ended (ReadState.ended).
        prefix = prefix_digest(path, read.offset) if read is not None and read.offset else None
        kept = read if read is not None and prefix else ReadState()
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
                "format": kept.format,
                "offset": kept.offset,
                "lines": kept.lines,
                "prefix": prefix or "",
                "carry": kept.carry,
            },
        )

    def forget(self, path: Path) -> None:
        """Read *path* again next time, whatever it is like (its last ingest failed)."""
        if (key := path_key(path)) is not None:
            IngestedFile.objects.filter(path=key).delete()


def _sessions_from(path: Path) -> int:
    counted = Session.objects.filter(source_path=str(path)).aggregate(n=Count("pk"))
    return int(counted["n"])
