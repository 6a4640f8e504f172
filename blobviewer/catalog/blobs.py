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
The whole store is brought in step by blobviewer.catalog.store_scan.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from django.db import IntegrityError, transaction
from django.utils import timezone

from blobviewer.bulk_insert import insert_objects
from blobviewer.catalog.provenance import PREVIEW_READ_BYTES, preview_of, read_preview
from blobviewer.catalog.renderings import write_rendering, write_rendering_of_value
from blobviewer.data_dir import renderings
from blobviewer.models import Blob
from core.content import Content, Structured, Text, content_kind, encode_text
from core.json_stream import PromotedJson
from core.json_values import dumps_for_storage
from core.lines import count_lines
from core.store import (
    BlobNotFound,
    BlobReader,
    BlobStore,
    BlobStoreError,
    StoreUnavailable,
)
from core.store.blob_id import BlobId, blob_created_at, parse_blob_id
from core.store.index import JsonIndex, TextIndex, open_index


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
    except StoreUnavailable:
        raise  # says nothing about the blob
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
        count=count_lines(content.text) if isinstance(content, Text) else len(value),
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
    if isinstance(content, Text):
        row.count = count_lines(content.text)
        return
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
    except StoreUnavailable:
        raise  # says nothing about the blob: never shown or saved as missing
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


def replacement_of(blob: Blob) -> uuid.UUID | None:
    """The blob that replaces *blob* since a rebuild re-derived its output (the last of a
    chain of rebuilds); None when nothing replaces it."""
    seen = {blob.pk}
    current = blob.replaced_by_id
    while current is not None and current not in seen:
        seen.add(current)
        following = Blob.objects.filter(pk=current).values_list("replaced_by_id", flat=True)
        after = following.first()
        if after is None:
            return current
        current = after
    return None


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
    except StoreUnavailable:
        raise  # says nothing about the blob: never shown or saved as missing
    except BlobStoreError:
        on_disk = False
    if not on_disk:
        return row
    return refresh_blob(blob_id, store=store, row=row)
