"""Bringing the catalog in step with a whole store (`manage.py blobs index`), and telling the
blob list, from two file stats, whether the store changed since the last run.

On an object store there is no folder whose time changes: `blobs index` lists the bucket
from a marker it remembers in the bucket (`<prefix>/.blobviewer/blobs-indexed.json`: the
creation time of the newest blob listed), re-listing a trailing window before it
(INDEX_WINDOW) because a slow upload can land behind a newer key; blob ids are UUID v7,
so keys sort by creation time. `blobs index --full` lists every blob (and finds the ones
gone from the store, or with ids that are not UUID v7), as the first run does.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from blobviewer.catalog.blobs import read_blob_facts, refresh_blob
from blobviewer.data_dir import blob_store, data_dir, on_object_store
from blobviewer.models import Blob
from core.store import (
    TEMP_PREFIX,
    BlobStore,
    BlobStoreError,
)
from core.store.blob_id import BlobId, parse_blob_id
from core.store.s3 import S3BlobStore  # boto3 only when an object store is used


@dataclass(frozen=True)
class CatalogReport:
    in_store: int  # blobs the store held when it was listed
    added: int  # rows made for blobs the database did not know
    reread: int  # rows that said missing or unreadable, read again
    vanished: int  # rows marked missing: the store no longer has their blob
    # On an object store indexed before: the blobs were listed from this creation time on
    # (the marker less INDEX_WINDOW), so *in_store* counts those only.
    listed_since: datetime | None = None


def catalog_store(
    store: BlobStore,
    *,
    every: int = 1000,
    progress: Callable[[int, int], None] | None = None,
    full: bool = False,
) -> CatalogReport:
    """Bring the Blob rows in step with the store: a row for every blob the database does
    not know, a new reading of rows that say missing or unreadable while the store has the
    blob, and rows of blobs gone from the store marked missing. Idempotent.

    Rows are saved *every* blobs at a time, each batch in one transaction, and
    ``progress(done, total)`` is called after each batch. Afterwards the store's
    modification time, taken before it was listed, is remembered beside it (see
    catalog_note). On an object store that was indexed before, only the blobs after
    the remembered marker (less INDEX_WINDOW) are listed, unless *full* or the database
    has no blob row yet (module docstring); blobs gone from the store are then not
    looked for. Raises BlobStoreError
    when the store cannot be listed.
    """
    # A database without a blob row (a new one beside an old bucket) takes a full listing.
    if isinstance(store, S3BlobStore) and not full and Blob.objects.exists():
        marker = _object_marker(store)
        if marker is not None:
            return _index_window(store, marker, every=every, progress=progress)
    folder = _watched_folder()
    mtime = _settled_mtime(folder) if folder is not None else None
    # The rows first, then the listing: a row that says present was saved after its file
    # was written, so a file absent from the later listing is really gone (and a blob
    # written meanwhile is simply not in either, for the next run).
    known = Blob.objects.values_list("id", "missing", "error").iterator(chunk_size=10_000)
    rows = {blob_id: (missing, bool(error)) for blob_id, missing, error in known}
    started = timezone.now()
    on_disk = set(store.ids_sync())
    new = sorted(on_disk - rows.keys())
    stale = sorted(
        blob_id
        for blob_id, (missing, error) in rows.items()
        if (missing or error) and blob_id in on_disk
    )
    vanished = sorted(
        blob_id for blob_id, (missing, _) in rows.items() if not missing and blob_id not in on_disk
    )
    _bring_in_step(store, new, stale, vanished, every=every, progress=progress)
    if mtime is not None:
        _write_marker(mtime)
    if isinstance(store, S3BlobStore):
        _write_object_marker(store, on_disk, started=started, previous=None)
    return CatalogReport(len(on_disk), len(new), len(stale), len(vanished))


def _bring_in_step(
    store: BlobStore,
    new: Sequence[uuid.UUID],
    stale: Sequence[uuid.UUID],
    vanished: Sequence[uuid.UUID],
    *,
    every: int,
    progress: Callable[[int, int], None] | None,
) -> None:
    """Insert rows for *new* blobs, read *stale* rows again, mark *vanished* ones missing;
    *every* at a time."""
    every = max(1, every)
    total = len(new) + len(stale) + len(vanished)
    done = 0
    for start in range(0, len(new), every):
        batch = new[start : start + every]
        facts = [read_blob_facts(blob_id, store=store, render=True) for blob_id in batch]
        # One INSERT a batch. A row that ingest or an upload made meanwhile holds the same
        # facts (blobs are immutable), so it is kept as it is.
        Blob.objects.bulk_create(facts, batch_size=500, ignore_conflicts=True)
        done += len(batch)
        if progress:
            progress(done, total)
    for start in range(0, len(stale), every):
        batch = stale[start : start + every]
        with transaction.atomic():
            for row in Blob.objects.filter(id__in=batch):
                refresh_blob(row.id, store=store, row=row)
        done += len(batch)
        if progress:
            progress(done, total)
    now = timezone.now()
    for start in range(0, len(vanished), every):
        batch = vanished[start : start + every]
        # An update, not a save: a row deleted meanwhile (retention) stays deleted.
        Blob.objects.filter(id__in=batch, missing=False).update(
            missing=True, kind="", size=None, count=None, error="", indexed_at=now
        )
        done += len(batch)
        if progress:
            progress(done, total)


# --- an object store: listing from a remembered marker --------------------------------------

# How far before the newest blob of the last listing the next one starts: an upload that
# began before that blob was made (its id was) but landed after the listing is still found.
INDEX_WINDOW = timedelta(hours=1)
MARKER_FOLDER = ".blobviewer"  # under the prefix: not a blob, skipped by listings of blobs
MARKER_NAME = "blobs-indexed.json"
# How many keys past the marker the blob list's note looks at for a new blob.
NOTE_LISTING = 1000


def _index_window(
    store: S3BlobStore,
    marker: dict[str, object],
    *,
    every: int,
    progress: Callable[[int, int], None] | None,
) -> CatalogReport:
    """catalog_store from the marker: the blobs created since INDEX_WINDOW before the newest
    one of the last listing."""
    newest = int(str(marker["newest_ms"]))
    started = timezone.now()
    window_ms = newest - int(INDEX_WINDOW.total_seconds() * 1000)
    listed = set(_blobs_after(store, window_ms))
    rows: dict[uuid.UUID, tuple[bool, bool]] = {}
    ordered = sorted(listed)
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
        for blob_id, missing, error in Blob.objects.filter(id__in=chunk).values_list(
            "id", "missing", "error"
        ):
            rows[blob_id] = (missing, bool(error))
    new = sorted(listed - rows.keys())
    stale = sorted(blob_id for blob_id, (missing, error) in rows.items() if missing or error)
    _bring_in_step(store, new, stale, (), every=every, progress=progress)
    _write_object_marker(store, listed, started=started, previous=newest)
    since = datetime.fromtimestamp(window_ms / 1000, tz=UTC)
    return CatalogReport(len(listed), len(new), len(stale), 0, listed_since=since)


def _key_at(ms: int) -> str:
    """The start of every UUID v7 made at or after the Unix time *ms* (in milliseconds):
    its first 48 bits, as the canonical form spells them (`01a231db-4a07`)."""
    digits = f"{max(ms, 0):012x}"
    return f"{digits[:8]}-{digits[8:]}"


def _created_ms(blob_id: uuid.UUID) -> int | None:
    """When a UUID v7 was made, in Unix milliseconds; None for another kind of id."""
    return blob_id.int >> 80 if blob_id.version == 7 else None


def _blobs_after(store: S3BlobStore, since_ms: int) -> Iterable[BlobId]:
    """The blobs under the prefix whose keys sort after the UUID v7s made before
    *since_ms*, in key order. Keys with a "/" (`derived/`, `sessions/`) sort after every
    UUID v7 key, so the listing stops at the first one."""
    for info in store.objects_root.list(start_after=_key_at(since_ms)):
        if "/" in info.name:
            return
        stem, dot, suffix = info.name.rpartition(".")
        if f"{dot}{suffix}" not in (".txt", ".json"):
            continue
        with contextlib.suppress(ValueError, BlobStoreError):
            blob_id = parse_blob_id(stem)
            if str(blob_id) == stem:  # only canonical names are blobs
                yield blob_id


def _object_marker(store: S3BlobStore) -> dict[str, object] | None:
    found = store.objects(MARKER_FOLDER).get(MARKER_NAME)
    if found is None:
        return None
    try:
        marker = json.loads(found.data)
        int(marker["newest_ms"])
        datetime.fromisoformat(str(marker["indexed_at"]))
    except (ValueError, TypeError, KeyError):
        return None  # damaged: the next run lists everything and writes a good one
    return marker


def _write_object_marker(
    store: S3BlobStore, listed: Iterable[uuid.UUID], *, started: datetime, previous: int | None
) -> None:
    """Remember the creation time of the newest UUID v7 listed (never one in the future,
    nor earlier than the marker before) and when the listing began."""
    now_ms = int(started.timestamp() * 1000)
    times = [ms for blob_id in listed if (ms := _created_ms(blob_id)) is not None and ms <= now_ms]
    newest = max([*times, *([previous] if previous is not None else [])], default=None)
    if newest is None:
        newest = now_ms - int(INDEX_WINDOW.total_seconds() * 1000)  # nothing listed yet
    data = {"newest_ms": newest, "indexed_at": started.isoformat()}
    store.objects(MARKER_FOLDER).put(MARKER_NAME, json.dumps(data).encode())


def _object_store_note(store: S3BlobStore) -> CatalogNote | None:
    """The blob list's note on an object store: a UUID v7 blob made after the newest one
    the last `blobs index` listed (one LIST request, and the marker's GET)."""
    try:
        marker = _object_marker(store)
        if marker is None:  # never indexed: a note when there is a blob to index
            return CatalogNote(None) if next(iter(_blobs_after(store, 0)), None) else None
        newest = int(str(marker["newest_ms"]))
        for number, blob_id in enumerate(_blobs_after(store, newest + 1)):
            if number >= NOTE_LISTING:
                break
            if _created_ms(blob_id) is not None:
                return CatalogNote(datetime.fromisoformat(str(marker["indexed_at"])))
    except BlobStoreError:
        return None  # a page never fails for its note
    return None


# Some filesystems keep modification times in coarse ticks, so a file added in the same
# tick as the change before it leaves the directory's time as it was. catalog_store waits
# until the store's time is this old before remembering it, so that any later change
# shows as a different time. (Network filesystems may be coarser still; see
# docs/store.md#the-catalog-and-blobs-index.)
SETTLE_NS = 20_000_000
_SETTLE_TRIES = 50


def _settled_mtime(root: Path) -> int | None:
    """The store directory's modification time, once no change of the last SETTLE_NS
    could share it; None when the directory does not exist."""
    mtime = None
    for _ in range(_SETTLE_TRIES):
        try:
            mtime = root.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        except OSError as error:
            raise BlobStoreError(f"cannot read {root}: {error.strerror}") from None
        age = time.time_ns() - mtime
        if age >= SETTLE_NS or age < 0:  # a clock behind the filesystem's: waiting won't help
            return mtime
        time.sleep((SETTLE_NS - age) / 1e9)
    return mtime  # the store changes all the time: the next change moves its time anyway


@dataclass(frozen=True)
class CatalogNote:
    """The store changed since blobs were last indexed; *indexed_at* is when that was
    (None: never, on this data folder)."""

    indexed_at: datetime | None


def _watched_folder() -> Path | None:
    """The folder whose modification time says the store changed: the data directory's
    `blobs/` (None with an object store, which keeps no such time; `blobs index` lists it)."""
    return None if on_object_store() else data_dir() / "blobs"


def catalog_marker_path() -> Path:
    """Where catalog_store remembers the store's modification time: `<data>/blobs-indexed.json`
    beside `<data>/blobs` (outside the store, so writing it does not change the store)."""
    return data_dir() / "blobs-indexed.json"


def catalog_note() -> CatalogNote | None:
    """None when the store has not changed since `blobs index` last ran, else a note.

    Cheap enough for every page: one stat of the store directory and one small file read,
    never a listing. A new or removed file changes the directory's modification time, so
    a blob an agent writes straight into the store shows here. So does anything else that
    adds or removes a file there (ingest and uploads, which index their own blobs; a
    crashed write; `blobs gc`): the note says the store *changed*, not that blobs are
    missing from the list. No store directory means no note: None. On an object store, a
    blob made after the newest one `blobs index` listed is (_object_store_note).
    """
    folder = _watched_folder()
    if folder is None:
        store = blob_store()
        return _object_store_note(store) if isinstance(store, S3BlobStore) else None
    try:
        mtime = folder.stat().st_mtime_ns
    except OSError:
        return None
    try:
        marker = json.loads(catalog_marker_path().read_bytes())
        indexed_mtime = int(marker["store_mtime_ns"])
        indexed_at = datetime.fromisoformat(str(marker["indexed_at"]))
    except (OSError, ValueError, TypeError, KeyError):
        return CatalogNote(None)
    return None if indexed_mtime == mtime else CatalogNote(indexed_at)


def _write_marker(mtime: int) -> None:
    path = catalog_marker_path()
    data = json.dumps({"store_mtime_ns": mtime, "indexed_at": timezone.now().isoformat()})
    # Atomically, like the store: readers see the old marker or the new one. The
    # temporary file's name is the store's, so `blobs gc` knows it for a leftover.
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(data + "\n")
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
