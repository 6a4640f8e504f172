"""A session's skeleton: every item's small columns and its calls' ids and names, never
its text or output, so laying out a 10,000-step session costs a few small queries."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connections

from blobviewer.models import BlobRef, Item, Session
from blobviewer.timeline.steps import ASSISTANT, CallRow, ItemRow
from blobviewer.timeline.tool_args import decoded_arguments


@dataclass(frozen=True)
class Skeleton:
    """Every item of a session as an ItemRow, and which blobs each item references."""

    rows: list[ItemRow]
    blobs_of: dict[int, list[uuid.UUID]]  # item pk -> the blobs it references, in order


def load_skeleton(session: Session) -> Skeleton:
    """Three queries, whatever the session's size: the items' small columns, their calls
    (ids and names, read inside the database from the JSON), and their blob references."""
    blobs_of: dict[int, list[uuid.UUID]] = {}
    for item_pk, blob_id in BlobRef.objects.filter(session=session).values_list(
        "item_id", "blob_id"
    ):
        blobs_of.setdefault(item_pk, []).append(blob_id)
    calls = _calls_of(session)
    connection = connections[Item.objects.db]
    # Plain SQL that both databases read alike: a long session has tens of thousands of
    # rows, and the ORM's per-value converters would cost more than the query.
    sql = _ITEMS_SQL.format(table=connection.ops.quote_name(Item._meta.db_table))
    with connection.cursor() as cursor:
        cursor.execute(sql, [_session_value(session, connection)])
        values = cursor.fetchall()
    no_calls: tuple[CallRow, ...] = ()
    rows = [
        ItemRow(
            seq,
            kind,
            pk,
            call_id,
            tool,
            bool(is_error),
            received,
            output,
            chars or 0,
            role,
            bool(sidechain),
            pk in blobs_of,
            input_tokens,
            output_tokens,
            context_tokens,
            calls.get(pk, no_calls),
            cache_read,
            cache_write,
            cost_usd,
        )
        for (
            pk,
            seq,
            kind,
            call_id,
            tool,
            is_error,
            received,
            output,
            chars,
            role,
            sidechain,
            input_tokens,
            output_tokens,
            context_tokens,
            cache_read,
            cache_write,
            cost_usd,
        ) in values
    ]
    return Skeleton(rows, blobs_of)


_ITEMS_SQL = """
    SELECT id, seq, type, call_id, tool, is_error, received_bytes, output_bytes,
           CASE WHEN type = 'tool_result' THEN 0 ELSE LENGTH(text) END, role,
           sidechain, input_tokens, output_tokens, context_tokens,
           cache_read_tokens, cache_write_tokens, cost_usd
    FROM {table} WHERE session_id = %s ORDER BY seq
"""


def _session_value(session: Session, connection: Any) -> Any:
    return Item._meta.get_field("session").get_db_prep_value(session.pk, connection)


_CALLS_SQL = {
    # Only ids and names leave the database (and an inspect call's small arguments): an
    # assistant item's arguments may hold whole files.
    "sqlite": """
        SELECT i.id, j.key,
               CASE WHEN j.type = 'object' THEN json_extract(j.value, '$.id') END,
               CASE WHEN j.type = 'object' THEN json_extract(j.value, '$.name') END,
               CASE WHEN j.type = 'object' AND json_extract(j.value, '$.name') = 'inspect'
                    THEN json_extract(j.value, '$.arguments') END
        FROM {table} i, json_each(i.tool_calls) j
        WHERE i.session_id = %s AND i.type = 'assistant' AND json_type(i.tool_calls) = 'array'
        ORDER BY i.id, j.key
    """,
    "postgresql": """
        SELECT i.id, j.ord - 1, j.value ->> 'id', j.value ->> 'name',
               CASE WHEN j.value ->> 'name' = 'inspect' THEN j.value ->> 'arguments' END
        FROM {table} i CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(i.tool_calls) = 'array' THEN i.tool_calls
                 ELSE '[]'::jsonb END
        ) WITH ORDINALITY AS j(value, ord)
        WHERE i.session_id = %s AND i.type = 'assistant'
        ORDER BY i.id, j.ord
    """,
}


def _calls_of(session: Session) -> dict[int, tuple[CallRow, ...]]:
    """Each assistant item's calls (by item pk), in the order the model made them."""
    connection = connections[Item.objects.db]
    sql = _CALLS_SQL.get(connection.vendor)
    if sql is None:  # another database: read the calls whole, through the ORM
        rows = [
            (pk, index, call.get("id"), call.get("name"), call.get("arguments"))
            for pk, calls in session.items.filter(type=ASSISTANT).values_list("pk", "tool_calls")
            if isinstance(calls, list)
            for index, call in enumerate(calls)
            if isinstance(call, dict)
        ]
    else:
        session_value = _session_value(session, connection)
        with connection.cursor() as cursor:
            cursor.execute(
                sql.format(table=connection.ops.quote_name(Item._meta.db_table)), [session_value]
            )
            rows = cursor.fetchall()
    calls: dict[int, list[CallRow]] = {}
    for pk, index, call_id, name, inspect_arguments in rows:
        calls.setdefault(pk, []).append(
            CallRow(
                index=int(index),
                id=call_id if isinstance(call_id, str) else "",
                name=name if isinstance(name, str) else "",
                inspect_blob=_inspected_blob(inspect_arguments) if name == "inspect" else None,
            )
        )
    return {pk: tuple(rows) for pk, rows in calls.items()}


def _inspected_blob(arguments: Any) -> uuid.UUID | None:
    """The blob id an inspect call's arguments name (a JSON object, or its text)."""
    for _ in range(2):  # text of an object, or text of a string that holds the object
        if not isinstance(arguments, str):
            break
        parsed = decoded_arguments(arguments)
        if parsed == arguments:
            break
        arguments = parsed
    if not isinstance(arguments, dict):
        return None
    try:
        return uuid.UUID(str(arguments.get("blob_id", "")).strip())
    except ValueError:
        return None
