"""Moving a team's data folder into object storage: `manage.py blobs copy --from DIR --to s3://…`.

:func:`copy_data` copies a data folder's blob store (`DIR/blobs`: blobs and their indexes),
its renderings (`DIR/derived`, caches, copied so pages stay quick) and its session logs
(`DIR/sessions/<id>.jsonl`) into the object store at a URL, through the stores' own calls
(core.store: open_sync().blocks() into put_stream_sync), byte for byte.

It is idempotent and resumable: every object is written whole or not at all and never over
another (If-None-Match), so a copy killed at any point leaves only complete objects, and
running it again skips what is there. Every blob, copied now or found there, is verified:
the destination must hold it with the source's kind and size, or the copy reports it and
exits non-zero. A session log that grew since an earlier copy replaces the copied one
under the session-log rule (blobviewer.catalog.session_logs); one that differs otherwise is
reported. Nothing is deleted from the source.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from blobviewer.catalog.session_logs import (
    FileSessionLogs,
    LogBusy,
    LogDiverges,
    ObjectSessionLogs,
    file_blocks,
)
from core.store import BlobNotFound, BlobStat, BlobStore, BlobStoreError, open_store
from core.store.blob_id import BlobId
from core.store.encoding import SUFFIXES
from core.store.index.index_file import INDEX_FOLDER, INDEX_SUFFIX
from core.store.s3 import S3BlobStore

# Blobs copied at once: object stores answer each request slowly but many in parallel.
DEFAULT_JOBS = 8


class CopyError(Exception):
    """The copy cannot start (a missing source, a destination that is no object store)."""


@dataclass
class PartReport:
    """What the copy did with one part (blobs, renderings, session logs)."""

    name: str
    total: int = 0
    copied: int = 0  # written now
    present: int = 0  # already there, verified
    copied_bytes: int = 0
    indexes: int = 0  # indexes written now
    failures: list[str] = field(default_factory=list)

    @property
    def done(self) -> int:
        return self.copied + self.present + len(self.failures)


@dataclass(frozen=True)
class CopyReport:
    parts: list[PartReport]

    @property
    def failures(self) -> list[str]:
        return [failure for part in self.parts for failure in part.failures]


@dataclass(frozen=True)
class Source:
    """The source's parts: a data folder (`blobs/`, `derived/`, `sessions/`), or a blob
    store folder alone (it holds blob files and no `blobs/`)."""

    blobs: Path
    derived: Path | None
    sessions: Path | None

    @classmethod
    def of(cls, folder: Path) -> Source:
        if not folder.is_dir():
            raise CopyError(f"--from {folder}: no such folder")
        if (folder / "blobs").is_dir():
            return cls(folder / "blobs", folder / "derived", folder / "sessions")
        return cls(folder, None, None)


Progress = Callable[[PartReport], None]


def copy_data(
    source: Path,
    destination: str,
    *,
    jobs: int = DEFAULT_JOBS,
    progress: Progress | None = None,
    every: int = 100,
) -> CopyReport:
    """Copy the data folder *source* into the object store at *destination* (module
    docstring). ``progress(part)`` is called every *every* items and at the end of a part."""
    if not destination.startswith("s3://"):
        raise CopyError(f"--to {destination!r}: expected an object store, s3://bucket/prefix")
    parts = Source.of(source)
    try:
        target = open_store(destination)
    except BlobStoreError as error:
        raise CopyError(f"--to {destination}: {error}") from None
    assert isinstance(target, S3BlobStore)
    reports = [
        copy_blobs(open_store(parts.blobs), target, "blobs", jobs, progress, every),
    ]
    if parts.derived is not None and parts.derived.is_dir():
        rendered = open_store(f"{destination.rstrip('/')}/derived")
        assert isinstance(rendered, S3BlobStore)
        reports.append(
            copy_blobs(open_store(parts.derived), rendered, "renderings", jobs, progress, every)
        )
    if parts.sessions is not None:
        logs = ObjectSessionLogs(target.objects("sessions"))
        reports.append(copy_logs(FileSessionLogs(parts.sessions), logs, jobs, progress, every))
    return CopyReport(reports)


def copy_blobs(
    source: BlobStore,
    target: S3BlobStore,
    name: str,
    jobs: int,
    progress: Progress | None,
    every: int,
) -> PartReport:
    """Copy every blob of *source* (and its index) that *target* lacks; verify the rest."""
    report = PartReport(name)
    try:
        ids = sorted(source.ids_sync())
    except FileNotFoundError:
        ids = []
    report.total = len(ids)
    there = _Listing.of(target)
    _run(
        ids,
        lambda blob_id: _copy_blob(source, target, blob_id, there, report),
        report,
        jobs,
        progress,
        every,
    )
    return report


@dataclass(frozen=True)
class _Listing:
    """What the target held when the copy began, from one listing (a few requests per
    thousand objects, instead of a request or two per blob): the size of each blob by its
    object's name, and of each index by the blob's id."""

    blobs: dict[str, int]
    indexes: dict[str, int]

    @classmethod
    def of(cls, target: S3BlobStore) -> _Listing:
        blobs, indexes = {}, {}
        folder = f"{INDEX_FOLDER}/"
        for info in target.objects_root.list():
            if "/" not in info.name:
                blobs[info.name] = info.size
            elif info.name.startswith(folder) and info.name.endswith(INDEX_SUFFIX):
                indexes[info.name[len(folder) : -len(INDEX_SUFFIX)]] = info.size
        return cls(blobs, indexes)


def _copy_blob(
    source: BlobStore, target: BlobStore, blob_id: BlobId, there: _Listing, report: PartReport
) -> str:
    """ "copied", "present" or a one-line failure."""
    try:
        stat = source.stat_sync(blob_id)
    except BlobNotFound:
        return "present"  # deleted from the source meanwhile: nothing to copy
    except BlobStoreError as error:
        return f"blob {blob_id}: cannot read it: {error}"
    listed = there.blobs.get(f"{blob_id}{SUFFIXES[stat.kind]}")
    try:
        copied = False
        if listed == stat.size:
            found: BlobStat | None = stat  # verified by the listing
        else:
            if listed is None:  # never clobbers: False when it is there after all
                with source.open_sync(blob_id) as reader:
                    copied = target.put_stream_sync(blob_id, stat.kind, reader.blocks())
            found = _stat(target, blob_id)  # verified after the write
        if found != stat:
            held = f"{found.kind}, {found.size:,} bytes" if found else "nothing"
            return (
                f"blob {blob_id}: the destination holds {held}, the source "
                f"{stat.kind}, {stat.size:,} bytes"
            )
        indexed = _copy_index(source, target, str(blob_id), there)
    except BlobStoreError as error:
        return f"blob {blob_id}: {error}"
    with _LOCK:
        report.indexes += indexed
        if copied:
            report.copied_bytes += stat.size
    return "copied" if copied else "present"


def _stat(store: BlobStore, blob_id: BlobId) -> BlobStat | None:
    try:
        return store.stat_sync(blob_id)
    except BlobNotFound:
        return None


def _copy_index(source: BlobStore, target: BlobStore, name: str, there: _Listing) -> int:
    """Copy the blob's index when the source has one and the target not (or not that
    one); 1 when it did. Indexes are caches: one the target cannot keep costs speed only."""
    reader = source.index_reader_sync(name)
    if reader is None:
        return 0
    with reader:
        if there.indexes.get(name) == reader.size:
            return 0
        return int(target.index_put_sync(name, reader.read(0, reader.size)))


def copy_logs(
    source: FileSessionLogs,
    target: ObjectSessionLogs,
    jobs: int,
    progress: Progress | None,
    every: int,
) -> PartReport:
    """Copy every session log the target lacks; one that grew since replaces its copy."""
    report = PartReport("session logs")
    kept = sorted(source.kept(), key=lambda log: log.session_id)
    report.total = len(kept)
    sizes = {log.session_id: log.size for log in kept}

    def copy(session_id: uuid.UUID) -> str:
        path = source.path(session_id)
        try:
            if target.size(session_id) is None and target.put_new(session_id, file_blocks(path)):
                outcome = "copied"
            else:
                check = target.check(session_id, path)
                outcome = "copied" if target.save(session_id, path, check) else "present"
            if outcome == "copied":
                with _LOCK:
                    report.copied_bytes += sizes[session_id]
            there = target.size(session_id)
            if there is None or there < sizes[session_id]:
                return f"session log {session_id}: the destination holds {there} bytes"
            return outcome
        except (LogDiverges, LogBusy) as error:
            return f"session log {session_id}: {error}"
        except (BlobStoreError, OSError) as error:
            return f"session log {session_id}: {error}"

    _run(list(sizes), copy, report, jobs, progress, every)
    return report


_LOCK = threading.Lock()
_BATCH = 1000  # items handed to the threads at a time (never a future per blob at once)
Item = TypeVar("Item")


def _run(
    items: Sequence[Item],
    copy: Callable[[Item], str],
    report: PartReport,
    jobs: int,
    progress: Progress | None,
    every: int,
) -> None:
    """``copy(item)`` for every item on *jobs* threads, counting its outcome ("copied",
    "present", or a failure's line) in *report* in the items' order."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for batch in _batches(items, _BATCH):
            for outcome in pool.map(copy, batch):
                if outcome == "copied":
                    report.copied += 1
                elif outcome == "present":
                    report.present += 1
                else:
                    report.failures.append(outcome)
                if progress and report.done % every == 0:
                    progress(report)
    if progress and report.done % every:
        progress(report)


def _batches(items: Sequence[Item], size: int) -> Iterator[Sequence[Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
