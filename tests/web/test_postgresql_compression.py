"""PostgreSQL keeps the long texts that ingest writes compressed with lz4 where the server
has it (migration 0010): quicker to write than pglz, and read back the same."""

from __future__ import annotations

import os
import uuid

import pytest
from django.db import connection

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Item
from web.records import header, user_item

pytestmark = pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").split(":")[0] not in ("postgres", "postgresql"),
    reason="column compression is PostgreSQL's (CI runs the suite on both databases)",
)

COLUMNS = {
    ("blobviewer_item", "text"),
    ("blobviewer_item", "output"),
    ("blobviewer_item", "tool_calls"),
    ("blobviewer_searchchunk", "text"),
    ("blobviewer_searchchunk", "folded"),
}


def server_has_lz4() -> bool:
    """lz4 is there to choose (PostgreSQL 14 or later, built with it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        row = cursor.fetchone()
    return bool(row and row[0])


@pytest.mark.django_db
def test_long_texts_are_stored_with_lz4_where_the_server_has_it_and_read_back_the_same(data_dir):
    if connection.pg_version < 140000:  # column compression came with 14: nothing to see
        pytest.skip("PostgreSQL before 14 compresses with pglz only")
    text = "".join(f"line {n}: the same words again and again\n" for n in range(2_000))
    session_id = uuid.uuid4()
    ingest_session(
        header(session_id), [user_item(1, text)], source_path="a.jsonl", store=blob_store()
    )
    item = Item.objects.get(session_id=session_id, seq=1)

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attrelid::regclass::text, attname, attcompression FROM pg_attribute"
            " WHERE attrelid IN ('blobviewer_item'::regclass, 'blobviewer_searchchunk'::regclass)"
            " AND attnum > 0"
        )
        methods = {(table, column): method for table, column, method in cursor.fetchall()}
        cursor.execute(
            "SELECT pg_column_compression(text) FROM blobviewer_item WHERE id = %s", [item.id]
        )
        (stored_with,) = cursor.fetchone()

    lz4 = server_has_lz4()
    compressed = {column for column, method in methods.items() if method == "l"}
    assert compressed == (COLUMNS if lz4 else set())
    assert stored_with == ("lz4" if lz4 else "pglz")
    assert item.text == text
