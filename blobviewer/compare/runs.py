"""A run's steps as the compare page matches them: each tool result with its call's tool
and arguments, its key (blobviewer.compare.step_keys), and what its output is, read in a
few queries whatever the run's length and never with its outputs' blobs.

Arguments leave the database cut to ARGUMENT_CHARS characters (a call may hold a whole
file): a longer argument is keyed by that much of its text and its length. Outputs are
compared without reading blobs: an output kept in the history by its text, a promoted
one by its blob's size and preview (two blobs alike in both are taken as the same
output until their diff says otherwise).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from django.db import connections

from blobviewer.compare.step_keys import step_key
from blobviewer.ingest.rows import promoted_output_blob
from blobviewer.models import Blob, Item, Session

ARGUMENT_CHARS = 4_000
SHOWN_ARGUMENT_CHARS = 200


@dataclass(frozen=True, slots=True)
class RunStep:
    """One step of a run: its result's seq, tool and title, the call's arguments as far
    as they were read, whether it failed, what its output is (*output_digest*: equal for
    equal outputs) and its blob (promoted)."""

    seq: int
    tool: str
    title: str
    arguments: Any
    key: str
    is_error: bool
    output_digest: str
    blob_id: uuid.UUID | None
    received_bytes: int

    @property
    def shown_arguments(self) -> str:
        """The arguments as compact JSON, cut for a line of the page."""
        if self.arguments is None:
            return ""
        text = orjson.dumps(self.arguments, default=str).decode()
        return text if len(text) <= SHOWN_ARGUMENT_CHARS else text[: SHOWN_ARGUMENT_CHARS - 1] + "…"


def run_steps(session: Session) -> list[RunStep]:
    """The steps of *session* in order: every tool result with its call (three queries)."""
    connection = connections[Item.objects.db]
    session_value = Item._meta.get_field("session").get_db_prep_value(session.pk, connection)
    calls = _calls(connection, session_value)
    workdir = _workdir(session)
    # Plain SQL, as blobviewer.timeline.skeleton reads a long session: the ORM's
    # per-value converters would cost more than the query.
    with connection.cursor() as cursor:
        cursor.execute(_RESULTS_SQL.format(table=_items_table(connection)), [session_value])
        results = cursor.fetchall()
    blob_ids = {
        seq: promoted_output_blob(tool, output) for seq, _, tool, _, _, output, _ in results
    }
    blobs = Blob.objects.in_bulk([b for b in blob_ids.values() if b is not None])
    steps = []
    for seq, call_id, tool, title, error, output, received in results:
        is_error = bool(error)
        name, arguments = calls.get(call_id, (tool, None))
        blob_id = blob_ids[seq]
        blob = blobs.get(blob_id) if blob_id is not None else None
        # What the output is: its text (at most a summary's length: promoted outputs are
        # compared by their blob's size and preview instead).
        digest = f"\x00blob:{blob.size}:{blob.preview}" if blob is not None else output
        steps.append(
            RunStep(
                seq,
                tool or name,
                title,
                arguments,
                step_key(tool or name, arguments, workdir),
                is_error,
                digest,
                blob_id,
                received,
            )
        )
    return steps


def _workdir(session: Session) -> str | None:
    """The folder the run worked in, where its recording says (`cwd` in its meta)."""
    meta = session.meta if isinstance(session.meta, dict) else {}
    cwd = meta.get("cwd")
    return cwd if isinstance(cwd, str) and cwd.startswith("/") else None


def _items_table(connection: Any) -> str:
    return str(connection.ops.quote_name(Item._meta.db_table))


def _calls(connection: Any, session_value: Any) -> dict[str, tuple[str, Any]]:
    """Each call of a session by its id: its tool's name and its arguments (parsed; the
    first ARGUMENT_CHARS characters and the length of an argument longer than that)."""
    sql = _CALLS_SQL[connection.vendor].format(table=_items_table(connection), chars=ARGUMENT_CHARS)
    with connection.cursor() as cursor:
        cursor.execute(sql, [session_value])
        rows = cursor.fetchall()
    calls: dict[str, tuple[str, Any]] = {}
    for call_id, name, text, length in rows:
        if not isinstance(call_id, str):
            continue
        calls[call_id] = (name if isinstance(name, str) else "", _arguments(text, length))
    return calls


def _arguments(text: str | None, length: int | None) -> Any:
    if text is None:
        return None
    if length is not None and length > len(text):
        return {"cut": text, "length": length}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text  # a string argument: json_extract gives it bare


_RESULTS_SQL = """
    SELECT seq, call_id, tool, title, is_error, output, received_bytes
    FROM {table} WHERE session_id = %s AND type = 'tool_result' ORDER BY seq
"""
_CALLS_SQL = {
    "sqlite": """
        SELECT json_extract(j.value, '$.id'), json_extract(j.value, '$.name'),
               substr(json_extract(j.value, '$.arguments'), 1, {chars}),
               length(json_extract(j.value, '$.arguments'))
        FROM {table} i, json_each(i.tool_calls) j
        WHERE i.session_id = %s AND i.type = 'assistant' AND json_type(i.tool_calls) = 'array'
              AND j.type = 'object'
        ORDER BY i.seq, j.key
    """,
    "postgresql": """
        SELECT j.value ->> 'id', j.value ->> 'name',
               left(j.value ->> 'arguments', {chars}), length(j.value ->> 'arguments')
        FROM {table} i CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(i.tool_calls) = 'array' THEN i.tool_calls
                 ELSE '[]'::jsonb END
        ) AS j(value)
        WHERE i.session_id = %s AND i.type = 'assistant' AND jsonb_typeof(j.value) = 'object'
        ORDER BY i.seq
    """,
}
