"""Bulk inserts run the same statements, by the same path, under DEBUG as in production,
and are seen as Django's own statements are: by the connection's execute wrappers and,
when queries are logged, in the log with their values."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from blobviewer.bulk_insert import claim_rows, insert_objects
from blobviewer.models import Blob, Item, SearchedBlob, Session

pytestmark = pytest.mark.django_db


def new_session() -> Session:
    return Session.objects.create(id=uuid.uuid4(), created_at=timezone.now())


def every_kind_of_insert(session: Session) -> None:
    """One of each: rows numbered by the database and returned (a COPY after the numbers
    on PostgreSQL), rows without returning (a COPY), conflicts ignored, rows claimed."""
    items = [Item(session=session, seq=n, type="user", text=f"note {n}") for n in range(1, 4)]
    insert_objects(Item, items, exclude=("id",), returning="id")
    blobs = [Blob(id=uuid.uuid4(), kind="text", size=10) for _ in range(3)]
    insert_objects(Blob, blobs)
    insert_objects(Blob, blobs[:2], ignore_conflicts=True)
    fields = ["blob_id", "indexed_bytes", "total_bytes", "indexed_at"]
    claim_rows(SearchedBlob, fields, [(blobs[0].id, 10, 10, timezone.now())], key="blob_id")


def recorder(ran: list[str]) -> Callable[..., Any]:
    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        ran.append(sql)
        return execute(sql, params, many, context)

    return record


def statements_run(settings: Any, *, debug: bool) -> list[str]:
    settings.DEBUG = debug
    session = new_session()
    ran: list[str] = []
    with connection.execute_wrapper(recorder(ran)):
        every_kind_of_insert(session)
    return ran


def test_the_same_statements_run_under_debug_as_without(settings):
    production = statements_run(settings, debug=False)
    debug = statements_run(settings, debug=True)

    assert debug == production
    assert any(sql.startswith("INSERT") for sql in production)
    if connection.vendor == "sqlite":  # given to sqlite3 straight, whoever is watching
        assert production[0].startswith("INSERT") and "?" in production[0]
    if connection.vendor == "postgresql":
        assert any(sql.startswith("COPY") for sql in production)


def test_statements_run_straight_are_logged_with_their_values_when_queries_are_logged():
    session = new_session()
    with CaptureQueriesContext(connection) as queries:
        insert_objects(
            Item, [Item(session=session, seq=1, type="user", text="ünï")], exclude=("id",)
        )

    logged = [query["sql"] for query in queries.captured_queries]
    assert len(logged) == 1
    if connection.vendor == "postgresql":
        assert logged[0].startswith("COPY")
    else:
        assert logged[0].startswith("INSERT") and "'ünï'" in logged[0]
