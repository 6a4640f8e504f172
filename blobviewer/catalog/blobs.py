"""Facts about blobs, read once from the store and kept in Blob rows.

Kind, size and counts come from the store through the blob's index (core.store.index, in the
store's `.index/`), which the first reading makes for a blob stored before indexes
existed, so a JSON blob is not parsed whole for them; a big JSON blob also gets its
indented rendering in `derived/`, written an entry at a time (blobviewer.catalog.renderings).

Rows are written by what brings blobs in: ingest and uploads (catalog_blobs, refresh_blob)
and `manage.py blobs index` (catalog_store) for blobs that agents or the CLI wrote straight
into the store. Page requests never write rows nor list the store: blob_for_view reads a
blob the database does not know (yet) through the store, and catalog_note tells the
blob list, from two file stats, whether the store changed since the last index run.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal, NamedTuple

from django.db import IntegrityError, transaction
from django.utils import timezone

from blobviewer.bulk_insert import insert_objects
from blobviewer.catalog.provenance import PREVIEW_READ_BYTES, preview_of, read_preview
from blobviewer.catalog.renderings import write_rendering, write_rendering_of_value
from blobviewer.data_dir import blob_store, data_dir, on_object_store, renderings
from blobviewer.models import Blob
from core.content import Content, Structured, Text, content_kind, encode_text
from core.json_stream import PromotedJson
from core.json_values import dumps_for_storage
from core.lines import count_lines
from core.store import (
    TEMP_PREFIX,
    BlobNotFound,
    BlobReader,
    BlobStore,
    BlobStoreError,
)
from core.store.blob_id import BlobId, blob_created_at, parse_blob_id
from core.store.index import JsonIndex, TextIndex, open_index
from core.store.s3 import S3BlobStore  # boto3 only when an object store is used


@dataclass
class BlobFacts:
    """Blob rows for a set of ids, read from the store by catalog_blobs and not saved yet:
    *rows* holds every id's row, *new* the rows to insert, *reread* the rows that said
    missing or unreadable and were read again; *made* the ids of new rows for blobs the
    caller has just stored, which no other row can have. save() writes them in a few
    statements."""

    rows: dict[uuid.UUID, Blob] = field(default_factory=dict)
    new: list[Blob] = field(default_factory=list)
    reread: list[Blob] = field(default_factory=list)
    made: set[uuid.UUID] = field(default_factory=set)

    def save(self) -> None:
        """Insert the new rows (a batch per statement) and save the re-read ones; call it
        inside the caller's transaction, so rows and the rows that reference them commit
        together. A row another process inserted meanwhile holds the same facts (blobs are
        immutable), so it is kept as it is. The rows of blobs just made go in as plain
        inserts first (on PostgreSQL a COPY, many times quicker than an INSERT that skips
        conflicts): only `blobs index`, finding their files in the store before this
        commits, can have inserted one of them, and then they go in again that way."""
        made = [row for row in self.new if row.id in self.made]
        try:
            if made:
                with transaction.atomic():
                    insert_objects(Blob, made)
        except IntegrityError:
            insert_objects(Blob, made, ignore_conflicts=True)
            for row in made:  # a row `blobs index` inserted has no maker yet: it gets it
                if row.made_by_id is not None:
                    Blob.objects.filter(id=row.id, made_by__isnull=True).update(
                        made_by_id=row.made_by_id, made_by_title=row.made_by_title
                    )
        found = [row for row in self.new if row.id not in self.made]
        insert_objects(Blob, found, ignore_conflicts=True)
        for row in self.reread:
            row.save()


def catalog_blobs(
    blob_ids: Iterable[uuid.UUID],
    *,
    store: BlobStore,
    stored: Mapping[uuid.UUID, Blob] | None = None,
) -> BlobFacts:
    """The facts of every id's blob, to be saved with BlobFacts.save(): ids the database
    does not know and ones it knows as missing or unreadable are (re)read from the store
    (files read and big JSON renderings written now, so that the caller's transaction
    does not wait for them); the others are its rows as they are. At most one query.

    *stored* holds rows made by stored_blob_facts for blobs the caller has just stored
    under new ids (which no row can have yet): those are new rows, neither looked up nor
    read again."""
    ids = set(blob_ids)
    known = {blob_id: row for blob_id, row in (stored or {}).items() if blob_id in ids}
    ids -= known.keys()
    facts = BlobFacts(rows=Blob.objects.in_bulk(list(ids)) if ids else {})
    facts.rows.update(known)
    facts.new.extend(known.values())
    facts.made.update(known)
    for blob_id in ids:
        row = facts.rows.get(blob_id)
        if row is None or row.missing or row.error:
            facts.rows[blob_id] = read_blob_facts(blob_id, store=store, row=row, render=True)
            (facts.new if row is None else facts.reread).append(facts.rows[blob_id])
    return facts


def refresh_blob(blob_id: uuid.UUID, *, store: BlobStore, row: Blob | None = None) -> Blob:
    """Read the blob's facts from the store into its row (created if needed) and save it.

    A big JSON blob also gets its indented rendering written to `derived/`.
    """
    row = read_blob_facts(blob_id, store=store, row=row, render=True)
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:  # another process indexed it at the same moment: same facts
        row.save(force_update=True)
    return row


def read_blob_facts(
    blob_id: uuid.UUID, *, store: BlobStore, row: Blob | None = None, render: bool = False
) -> Blob:
    """The blob's facts as the store has them, put into *row* (or a new Blob); nothing is
    saved. With *render*, a big JSON blob's indented rendering is written to `derived/`.

    A blob the store lacks comes back with ``missing`` set; one it cannot read, with
    ``error`` set. A blob without an index takes one pass over its file (to make it).
    """
    row = row or Blob(id=blob_id)
    row.created_at = blob_created_at(blob_id)
    row.indexed_at = timezone.now()
    row.kind, row.size, row.count, row.error = "", None, None, ""
    row.missing = False
    try:
        with store.open_sync(blob_id) as blob:
            row.size = blob.size
            _read_kind_and_count(row, blob, store=store, render=render)
            row.preview = read_preview(blob)  # the blob list's first line (provenance)
    except (BlobNotFound, FileNotFoundError):
        row.missing = True
        row.size = None
    except (BlobStoreError, OSError) as error:
        row.error = str(error)[:500]
    return row


def stored_blob_facts(blob_id: uuid.UUID, content: Content, *, store: BlobStore) -> Blob | None:
    """What read_blob_facts reads of the blob *content* has just been stored as (in *store*,
    under *blob_id*), made from the content in hand instead of the file; nothing is saved.
    None for a blob that has to be read: one that gets an index file or a rendering (a
    big one), or content held as a promoted stream."""
    if isinstance(content, Text):
        data, kind = encode_text(content.text), "text"
    elif isinstance(content, Structured) and not isinstance(content, PromotedJson):
        value = content.value
        if not isinstance(value, list | dict):
            return None
        data, kind = dumps_for_storage(value), "json"
    else:
        return None
    if len(data) >= min(store.index_min_bytes, RENDER_JSON_FROM_BYTES):
        return None
    return Blob(
        id=blob_id,
        kind=content_kind(content),
        size=len(data),
        # A text's lines as its index counts them; an array's entries, an object's keys.
        count=count_lines(content.text) if kind == "text" else len(value),
        created_at=blob_created_at(blob_id),
        missing=False,
        error="",
        indexed_at=timezone.now(),
        preview=preview_of(data[:PREVIEW_READ_BYTES], kind),
    )


# A JSON blob this big gets its indented rendering written once, with a line index, so
# its pages need not parse the whole blob on every request.
RENDER_JSON_FROM_BYTES = 1 << 20


def _read_kind_and_count(row: Blob, blob: BlobReader, *, store: BlobStore, render: bool) -> None:
    """Kind and count from the blob's index; a JSON blob the index does not describe (a
    small one, or one the store cannot take an index for) is loaded instead."""
    index = open_index(store, row.id, min_bytes=store.index_min_bytes)
    if isinstance(index, TextIndex):
        with index:
            row.kind, row.count = "text", index.line_count
        return
    if isinstance(index, JsonIndex):
        with index:
            root = index.root()
            row.kind = f"json_{root.kind}"
            row.count = root.count if root.table is not None else None
            if render and blob.size >= RENDER_JSON_FROM_BYTES:
                write_rendering(row.id, index)
        return
    content = store.load_sync(row.id)
    row.kind = content_kind(content)
    value = content.value
    row.count = len(value) if isinstance(value, list | dict) else None
    if render and blob.size >= RENDER_JSON_FROM_BYTES:
        write_rendering_of_value(row.id, value)


# --- derived files -------------------------------------------------------------------------


def derived_bytes(blob_id: BlobId | str) -> int:
    """The bytes the blob's derived files hold in `derived/` (its indented JSON rendering
    and that rendering's line index); 0 when there are none."""
    return _stored_bytes(renderings(), str(parse_blob_id(blob_id)))


def discard_derived(blob_id: BlobId | str) -> int:
    """Delete the blob's derived files; returns the bytes freed. They are caches: a page
    reads the blob itself when they are gone. Whoever deletes a blob deletes these with it;
    the blob's own index goes with the blob (BlobStore.discard_sync)."""
    store = renderings()
    name = str(parse_blob_id(blob_id))
    freed = _stored_bytes(store, name)
    store.discard_sync(name)  # the rendering and its index
    return freed


def _stored_bytes(store: BlobStore, name: str) -> int:
    """The bytes of blob *name* in *store* and of its index (0 for those it lacks)."""
    try:
        size = store.size_sync(name)
    except BlobNotFound:
        size = 0
    index = store.index_reader_sync(name)
    if index is not None:
        with index:
            size += index.size
    return size


# --- what a page shows ---------------------------------------------------------------------

# Why a page reads a blob through the store rather than its row: the database has no row
# for it ("new": an agent or the CLI wrote it straight into the store), or its row says
# missing and the store has it now ("appeared").
Unindexed = Literal["", "new", "appeared"]


class ViewedBlob(NamedTuple):
    blob: Blob  # the row, or an unsaved Blob holding what the store says
    unindexed: Unindexed


def blob_for_view(blob_id: uuid.UUID, *, store: BlobStore) -> ViewedBlob | None:
    """The blob a page shows, without writing a row; None when neither the database nor
    the store knows the id.

    When the row is out of step with the store (no row, or one that says missing while
    the store has the blob), the facts are read through the store into an unsaved Blob,
    and ``unindexed`` says why, so the page can name `manage.py blobs index`. A row whose
    blob has left the store is shown missing, unsaved.
    """
    row = Blob.objects.filter(id=blob_id).first()
    try:
        on_disk = store.exists_sync(blob_id)
    except BlobStoreError:
        on_disk = False
    if row is None:
        if not on_disk:
            return None
        return ViewedBlob(read_blob_facts(blob_id, store=store), "new")
    if row.missing and on_disk:
        return ViewedBlob(read_blob_facts(blob_id, store=store, row=row), "appeared")
    if not row.missing and not on_disk:
        return ViewedBlob(as_missing(row), "")
    return ViewedBlob(row, "")


def as_missing(blob: Blob) -> Blob:
    """*blob* shown as missing from the store (for a page; not saved)."""
    blob.missing, blob.size, blob.count, blob.error = True, None, None, ""
    return blob


def catalogued_blob(blob_id: uuid.UUID, *, store: BlobStore) -> Blob | None:
    """The blob's row for a request that writes (e.g. making a share link): made or
    re-read from the store when the database does not know the blob as the store has it;
    None when neither knows the id."""
    row = Blob.objects.filter(id=blob_id).first()
    if row is not None and not row.missing:
        return row
    try:
        on_disk = store.exists_sync(blob_id)
    except BlobStoreError:
        on_disk = False
    if not on_disk:
        return row
    return refresh_blob(blob_id, store=store, row=row)


# --- indexing the whole store (`manage.py blobs index`) ------------------------------------


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
# shows as a different time. (Network filesystems may be coarser still; see the README.)
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


# Transitional: the ingest room still imports these under their old names.
index_blobs = catalog_blobs
index_store = catalog_store
