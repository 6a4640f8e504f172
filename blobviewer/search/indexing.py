"""The search index: what search reads of sessions and the blobs they reference, written
when a session is ingested and when a blob it references arrives later (`index_session`,
`index_blob`), so that a search never reads a blob file.

Titles, items (text, tool calls, tool output) and blobs' text are kept as SearchChunk rows,
each with its folded text where it needs a copy (blobviewer.search.folding); the inserts
feed the trigram index that blobviewer.search.queries looks queries up in (SQLite's FTS5
table, through triggers; PostgreSQL's pg_trgm GIN index).

Long texts are cut into chunks of CHUNK_CHARS characters that overlap by OVERLAP_CHARS,
more than any folded query can span, so a match across a chunk's edge is inside the next
chunk whole. A blob is indexed up to settings.BLOBVIEWER_SEARCH_BLOB_BYTES of its text
(its indented rendering for JSON); its SearchedBlob row says how much, and its page says
so when that is not all of it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from blobviewer.bulk_insert import claim_rows, insert_rows
from blobviewer.ingest.marks import DEFAULT_BLOB_BYTES
from blobviewer.models import Blob, BlobRef, Item, SearchChunk, SearchedBlob, Session
from blobviewer.search.folding import folded_copy, storable
from blobviewer.search.queries import MAX_QUERY_CHARS
from core.content import Structured, cut_utf8, decode_text, encode_text, utf8_size
from core.json_values import dumps_indented
from core.store import BlobStore, BlobStoreError

CHUNK_CHARS = 64 * 1024
# A folded query is at most 3 characters per character typed (e.g. "ΐ" folds to three);
# a chunk reaches this far into the next one so any match lies wholly inside one chunk.
OVERLAP_CHARS = 4 * MAX_QUERY_CHARS

_IDS = 500  # ids per query (both databases take far more parameters)

Source = SearchChunk.Source


def blob_bytes_limit() -> int:
    """How many bytes of a blob's text search indexes (BLOBVIEWER_SEARCH_BLOB_BYTES)."""
    return int(getattr(settings, "BLOBVIEWER_SEARCH_BLOB_BYTES", DEFAULT_BLOB_BYTES))


@dataclass(frozen=True, slots=True)
class Chunk:
    start: int  # in characters, within the whole text
    line: int  # the line of its first character (1-based)
    text: str


def text_chunks(text: str) -> Iterator[Chunk]:
    """*text* in overlapping chunks; nothing for an empty text."""
    start, line = 0, 1
    while start < len(text):
        end = start + CHUNK_CHARS + OVERLAP_CHARS
        yield Chunk(start, line, text[start:end])
        if end >= len(text):
            return
        line += text.count("\n", start, start + CHUNK_CHARS)
        start += CHUNK_CHARS


# The columns of a chunk row as indexing writes them (see _chunk_rows).
_CHUNK_FIELDS = ("session_id", "item_id", "blob_id", "source", "start", "line", "text", "folded")
ChunkRow = tuple[Any, Any, Any, str, int, int, str, str | None]


def _chunk_rows(
    text: str, source: str, *, session_id: Any = None, item_id: Any = None, blob_id: Any = None
) -> Iterator[ChunkRow]:
    """The rows of *text*'s chunks (_CHUNK_FIELDS), folded as queries are."""
    for chunk in text_chunks(storable(text)):
        yield (
            session_id,
            item_id,
            blob_id,
            source,
            chunk.start,
            chunk.line,
            chunk.text,
            folded_copy(chunk.text),
        )


def calls_text(tool_calls: Any) -> str:
    """What search reads of an assistant item's tool calls: per call, its name and then one
    line per argument (`name: value`; a value that is not a string as compact JSON)."""
    if not isinstance(tool_calls, list):
        return ""
    lines: list[str] = []
    for call in tool_calls:
        if not isinstance(call, dict):
            continue
        lines.append(str(call.get("name") or ""))
        arguments = call.get("arguments")
        if isinstance(arguments, dict):
            for name, value in arguments.items():
                shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                lines.append(f"{name}: {shown}")
        elif arguments not in (None, ""):
            lines.append(str(arguments) if isinstance(arguments, str) else json.dumps(arguments))
    return "\n".join(lines)


def _item_rows(
    session_id: Any, item_id: int, text: str, tool_calls: Any, output: str
) -> Iterator[ChunkRow]:
    yield from _chunk_rows(text, Source.TEXT, session_id=session_id, item_id=item_id)
    calls = calls_text(tool_calls)
    yield from _chunk_rows(calls, Source.CALLS, session_id=session_id, item_id=item_id)
    yield from _chunk_rows(output, Source.OUTPUT, session_id=session_id, item_id=item_id)


class _ChunkWriter:
    """Chunk rows written a few megabytes of text at a time: few statements, each of a
    size that neither database minds (a blob's text is up to 4 MB, and its folded copy
    where it has one). The trigram index is updated by the inserts themselves (SQLite's
    triggers feed FTS5; PostgreSQL's GIN index), so there is nothing else to write."""

    BYTES = 8 << 20

    def __init__(self) -> None:
        self.rows: list[ChunkRow] = []
        self.size = 0
        self.written = 0

    def add(self, rows: Iterable[ChunkRow]) -> None:
        for row in rows:
            self.rows.append(row)
            self.size += len(row[6]) + len(row[7] or "")
            if self.size >= self.BYTES:
                self.flush()

    def flush(self) -> int:
        if self.rows:
            insert_rows(SearchChunk, _CHUNK_FIELDS, self.rows)
            self.written += len(self.rows)
            self.rows, self.size = [], 0
        return self.written


def index_items(items: Iterable[Item]) -> int:
    """(Re)index the text, tool calls and output of *items*; returns the chunks written."""
    items = list(items)
    if not items:
        return 0
    with transaction.atomic(savepoint=False):
        for batch in _batches([item.pk for item in items], _IDS):
            SearchChunk.objects.filter(item_id__in=batch).delete()
        writer = _ChunkWriter()
        for item in items:
            writer.add(
                _item_rows(item.session_id, item.pk, item.text, item.tool_calls, item.output)
            )
        return writer.flush()


def index_title(session: Session) -> None:
    """Keep the session's title chunk equal to its title (writes only when it changed)."""
    title = storable(session.title)
    current = list(
        SearchChunk.objects.filter(session_id=session.pk, source=Source.TITLE).values_list(
            "text", flat=True
        )
    )
    if current == ([title] if title else []):
        return
    with transaction.atomic(savepoint=False):
        SearchChunk.objects.filter(session_id=session.pk, source=Source.TITLE).delete()
        if title:
            SearchChunk.objects.create(
                session_id=session.pk, source=Source.TITLE, text=title, folded=folded_copy(title)
            )


def index_session(
    session_id: uuid.UUID, *, store: BlobStore, changed_items: Iterable[Item] = ()
) -> None:
    """Index what search does not know yet of a session: its title, items that have no
    chunks, *changed_items* (rewritten in place, e.g. re-derived by a rebuild), and the
    blobs it references that the store has and search has not read.

    Cheap when nothing is new (a few queries), so ingest calls it after every run. One
    transaction: a commit per blob would cost a disk sync each. Rows go in a few
    multi-row statements whatever the number of items and blobs.
    """
    with transaction.atomic():
        _index_session(session_id, store=store, changed_items=changed_items)


def _index_session(
    session_id: uuid.UUID, *, store: BlobStore, changed_items: Iterable[Item]
) -> None:
    # Locked: two ingests of one session at once (two ingest commands, an upload) index it one
    # after the other, the second finding done what the first did (no chunk twice).
    session = Session.objects.select_for_update().filter(pk=session_id).only("pk", "title").first()
    if session is None:
        return
    index_title(session)
    index_items(changed_items)
    unindexed = (
        Item.objects.filter(session_id=session_id)
        .exclude(text="", output="", tool_calls=[])
        .exclude(
            pk__in=SearchChunk.objects.filter(session_id=session_id, item__isnull=False).values(
                "item_id"
            )
        )
        .values_list("pk", "text", "tool_calls", "output")
    )
    writer = _ChunkWriter()
    # Read in batches and written after each: a cursor is not read while writing.
    for batch in _batches(unindexed.iterator(chunk_size=_IDS), _IDS):
        for pk, text, tool_calls, output in batch:
            writer.add(_item_rows(session_id, pk, text, tool_calls, output))
        writer.flush()
    # As ids, not a subquery: a database that one ingest is filling has no statistics
    # yet, and PostgreSQL planned the subquery as a read of every blob for each session
    # (40 ms a session at 25,000 blobs, and growing).
    referenced = BlobRef.objects.filter(session_id=session_id).values_list("blob_id", flat=True)
    index_pending_blobs(store=store, blob_ids=referenced)


def reindex_session(session_id: uuid.UUID, *, store: BlobStore) -> None:
    """Index a session afresh, e.g. after its items were re-derived in place."""
    SearchChunk.objects.filter(session_id=session_id).delete()
    index_session(session_id, store=store)


def index_pending_blobs(*, store: BlobStore, blob_ids: Iterable[uuid.UUID] | None = None) -> int:
    """Index every blob (among *blob_ids*) that the store has and search has not read yet;
    returns how many were indexed."""
    blobs = Blob.objects.filter(missing=False, error="", search_index__isnull=True)
    if blob_ids is None:
        pending = list(blobs.values_list("pk", flat=True))
    else:
        pending = [
            pk
            for batch in _batches(blob_ids, _IDS)
            for pk in blobs.filter(pk__in=batch).values_list("pk", flat=True)
        ]
    done = 0
    with transaction.atomic(savepoint=False):  # one disk sync, not one per blob
        texts: dict[uuid.UUID, tuple[str, int]] = {}
        size = 0
        for blob_id in pending:
            read = _blob_text(blob_id, store=store)
            if read is None:
                continue
            texts[blob_id] = read
            size += len(read[0])
            if size >= _ChunkWriter.BYTES:
                done += _write_blob_chunks(texts)
                texts, size = {}, 0
        done += _write_blob_chunks(texts)
    return done


def index_blob(blob: Blob, *, store: BlobStore) -> SearchedBlob | None:
    """Read the blob's text (up to the limit) into the index; None when the store cannot
    give it (missing or damaged: it is indexed once it can)."""
    read = _blob_text(blob.pk, store=store)
    if read is None:
        return None
    with transaction.atomic(savepoint=False):
        SearchedBlob.objects.filter(blob_id=blob.pk).delete()
        _write_blob_chunks({blob.pk: read})
    return SearchedBlob.objects.get(blob_id=blob.pk)


def _blob_text(blob_id: uuid.UUID, *, store: BlobStore) -> tuple[str, int] | None:
    """blob_search_text up to the limit; None when the store cannot give it."""
    try:
        return blob_search_text(store, blob_id, limit=blob_bytes_limit())
    except (BlobStoreError, OSError, UnicodeDecodeError):
        return None


def _write_blob_chunks(texts: dict[uuid.UUID, tuple[str, int]]) -> int:
    """Write the SearchedBlob row and the chunks of each blob of *texts* (its text and
    total size); returns how many were written. A blob another transaction indexed
    meanwhile keeps that transaction's rows: its SearchedBlob row is claimed first."""
    if not texts:
        return 0
    now = timezone.now()
    claimed = claim_rows(
        SearchedBlob,
        ("blob_id", "indexed_bytes", "total_bytes", "indexed_at"),
        [(blob_id, utf8_size(text), total, now) for blob_id, (text, total) in texts.items()],
        key="blob_id",
    )
    ids = [blob_id for blob_id in texts if blob_id in claimed]
    for batch in _batches(ids, _IDS):  # chunks of an earlier reading (a re-index)
        SearchChunk.objects.filter(blob_id__in=batch).delete()
    writer = _ChunkWriter()
    for blob_id in ids:
        writer.add(_chunk_rows(texts[blob_id][0], Source.BLOB, blob_id=blob_id))
    writer.flush()
    return len(ids)


def blob_search_text(store: BlobStore, blob_id: uuid.UUID, *, limit: int) -> tuple[str, int]:
    """The first *limit* UTF-8 bytes of what a blob's page shows (a text as it is, JSON
    indented), cut on a character boundary, and the size of all of it."""
    with store.open_sync(blob_id) as blob:
        if blob.kind == "text":
            head = blob.read(0, limit + 4)
            return decode_text(cut_utf8(head, min(limit, blob.size))), blob.size
    content = store.load_sync(blob_id)
    assert isinstance(content, Structured)  # the store said it is not a text
    rendered = encode_text(dumps_indented(content.value))
    return decode_text(cut_utf8(rendered, limit)), len(rendered)


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# --- keeping the index in step with saved rows ---------------------------------------------
# Ingest writes items in bulk and indexes them itself (index_session); these catch the rows
# saved one at a time (the admin, `save()` in code), so no title or item goes unsearched.


def _title_saved(sender: type[Session], instance: Session, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if kwargs.get("raw") or (fields is not None and "title" not in fields):
        return
    index_title(instance)


def _item_saved(sender: type[Item], instance: Item, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if kwargs.get("raw") or (
        fields is not None and not {"text", "tool_calls", "output"} & set(fields)
    ):
        return
    index_items([instance])


def connect_signals() -> None:
    """Called once from the app's ready()."""
    from django.db.models.signals import post_save

    post_save.connect(_title_saved, sender=Session, dispatch_uid="search-title")
    post_save.connect(_item_saved, sender=Item, dispatch_uid="search-item")
