"""Search indexing in bulk (docs/pages.md#search): a session's items and blobs go into the
search index in a few statements whatever their number, each text cut into the chunks
text_chunks makes of it, and a blob's rows written once even when two indexers reach it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from blobviewer.bulk_insert import claim_rows
from blobviewer.ingest import sessions as ingest_module
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Blob, Item, SearchChunk, SearchedBlob
from blobviewer.search import indexing as search
from blobviewer.search.indexing import (
    CHUNK_CHARS,
    blob_bytes_limit,
    blob_search_text,
    index_session,
    text_chunks,
)
from core.store.blob_id import BLOB_REF
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

BIG = "".join(f"line {n}: the tool printed this\n" for n in range(200))  # promoted


def ingest_unindexed(store: Any, monkeypatch: Any, items: int, blobs: int) -> uuid.UUID:
    """A session of *items* items, *blobs* of them outputs promoted to blobs, recorded
    without its search index."""
    monkeypatch.setattr(ingest_module, "index_session", lambda *args, **kwargs: None)
    records = [
        tool_result_item(seq, f"{seq}\n{BIG}", call_id=f"c{seq}")
        if seq <= blobs
        else user_item(seq, f"note {seq} ünïcödé")
        for seq in range(1, items + 1)
    ]
    session_id = uuid.uuid4()
    ingest_session(header(session_id), records, source_path="test", store=store)
    monkeypatch.undo()
    return session_id


def statements_to_index(session_id: uuid.UUID, store: Any) -> int:
    with CaptureQueriesContext(connection) as queries:
        index_session(session_id, store=store)
    return len(queries)


def test_a_session_is_indexed_in_a_few_statements_whatever_its_size(store, monkeypatch):
    small = ingest_unindexed(store, monkeypatch, 20, 5)
    large = ingest_unindexed(store, monkeypatch, 1_500, 300)

    few, many = statements_to_index(small, store), statements_to_index(large, store)

    # 1,480 more items and 295 more blobs: a few more batches, not statements for each.
    assert many - few <= 6, (few, many)
    assert SearchedBlob.objects.count() == Blob.objects.count() == 305
    items_with_chunks = SearchChunk.objects.filter(item__isnull=False).values("item_id")
    assert items_with_chunks.distinct().count() == 1_520


def test_each_text_is_indexed_as_the_chunks_text_chunks_makes_of_it(store, monkeypatch):
    long_text = "".join(f"row {n} with Ünïcode ΐ and ß\n" for n in range(10_000))
    assert len(long_text) > 3 * CHUNK_CHARS
    session_id = uuid.uuid4()
    records = [user_item(1, long_text), tool_result_item(2, BIG + long_text)]
    ingest_session(header(session_id), records, source_path="test", store=store)

    item_chunks = list(
        SearchChunk.objects.filter(session_id=session_id, item__seq=1)
        .order_by("start")
        .values_list("source", "start", "line", "text", "folded")
    )
    assert item_chunks == [
        ("text", c.start, c.line, c.text, c.text.casefold()) for c in text_chunks(long_text)
    ]
    output = Item.objects.get(session_id=session_id, seq=2).output
    blob_id = uuid.UUID(BLOB_REF.match(output).group(1))
    text, total = blob_search_text(store, blob_id, limit=blob_bytes_limit())
    blob_chunks = list(
        SearchChunk.objects.filter(blob_id=blob_id)
        .order_by("start")
        .values_list("session_id", "item_id", "source", "start", "line", "text", "folded")
    )
    assert blob_chunks == [
        (None, None, "blob", c.start, c.line, c.text, c.text.casefold()) for c in text_chunks(text)
    ]
    state = SearchedBlob.objects.get(blob_id=blob_id)
    assert (state.indexed_bytes, state.total_bytes) == (len(text.encode()), total)


def test_a_blob_indexed_meanwhile_by_another_keeps_its_rows(store, monkeypatch):
    session_id = ingest_unindexed(store, monkeypatch, 3, 2)
    blob_ids = sorted(Blob.objects.values_list("id", flat=True))
    read_text = search._blob_text

    def another_indexer_gets_there_first(blob_id: uuid.UUID, **kwargs: Any) -> Any:
        # While this indexer reads the first blob, another one indexes it and commits.
        if blob_id == blob_ids[0]:
            SearchedBlob.objects.create(blob_id=blob_id, indexed_bytes=1, total_bytes=1)
            SearchChunk.objects.create(blob_id=blob_id, source="blob", text="x", folded="x")
        return read_text(blob_id, **kwargs)

    monkeypatch.setattr(search, "_blob_text", another_indexer_gets_there_first)
    index_session(session_id, store=store)

    assert list(SearchChunk.objects.filter(blob_id=blob_ids[0]).values_list("text")) == [("x",)]
    assert SearchedBlob.objects.get(blob_id=blob_ids[0]).indexed_bytes == 1
    assert SearchChunk.objects.filter(blob_id=blob_ids[1]).count() == 1
    assert SearchedBlob.objects.get(blob_id=blob_ids[1]).indexed_bytes > 1


def test_claimed_rows_are_only_those_this_call_inserted():
    kept, new = (Blob.objects.create(id=uuid.uuid4(), kind="text") for _ in range(2))
    SearchedBlob.objects.create(blob=kept, indexed_bytes=1, total_bytes=1)
    now = timezone.now()

    claimed = claim_rows(
        SearchedBlob,
        ("blob_id", "indexed_bytes", "total_bytes", "indexed_at"),
        [(kept.id, 7, 7, now), (new.id, 5, 9, now)],
        key="blob_id",
    )

    assert claimed == {new.id}
    assert SearchedBlob.objects.get(blob=kept).indexed_bytes == 1
    assert SearchedBlob.objects.get(blob=new).total_bytes == 9


def test_a_chunk_keeps_a_folded_copy_only_where_lowering_ascii_does_not_make_it(store):
    session_id = uuid.uuid4()
    records = [
        user_item(1, "Plain ASCII Text"),
        user_item(2, "naïve Text"),  # non-ASCII, but lowering its ASCII folds it
        user_item(3, "Straße"),  # "ss": only a copy has it
    ]
    ingest_session(header(session_id), records, source_path="test", store=store)

    kept = dict(
        SearchChunk.objects.filter(session_id=session_id, source="text").values_list(
            "item__seq", "folded"
        )
    )
    assert kept == {1: None, 2: None, 3: "strasse"}


def test_a_sessions_blobs_are_found_by_their_ids_for_a_planner_without_statistics(
    store, monkeypatch
):
    """The blobs of a session still to index are asked for by their ids, a few hundred a
    statement: as a subquery of the session's references, PostgreSQL planned it (for a
    database one ingest is filling, with no statistics yet) as a read of every blob, so
    that each session took longer than the one before."""
    session_id = ingest_unindexed(store, monkeypatch, 8, 5)
    monkeypatch.setattr(search, "_IDS", 2)

    with CaptureQueriesContext(connection) as queries:
        index_session(session_id, store=store)

    pending = [q["sql"] for q in queries if "searchedblob" in q["sql"] and "SELECT" in q["sql"]]
    assert len(pending) == 3, pending  # 5 blobs, 2 ids a statement
    assert not any("blobviewer_blobref" in sql for sql in pending), pending
    assert SearchedBlob.objects.count() == 5
