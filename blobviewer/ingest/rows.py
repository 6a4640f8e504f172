"""The Item rows ingest writes, made from records: each field made storable, each record's
digest (what keys it on the next ingest), token counts and times a database column holds,
and the blob references an item's text and output make.

Databases cannot hold every str Python can: PostgreSQL refuses NUL in text and JSON, and
neither database encodes lone surrogates. The recording keeps the original; the rows keep
the visible stand-ins of blobviewer.search.folding.storable, which search folds too."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from blobviewer.ingest.errors import IngestError
from blobviewer.ingest.importers import OUR_FORMAT
from blobviewer.ingest.importers.recording import finite_number, str_or_empty
from blobviewer.models import Item
from blobviewer.search.folding import storable
from core.content import utf8_size
from core.store.blob_id import BLOB_REF, blob_created_at, find_blob_refs

TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "context_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)
# What a model call used: its tokens and its cost as the recording gives it (docs/cost.md).
USAGE_FIELDS = (*TOKEN_FIELDS, "cost_usd")
_MAX_BIGINT = 2**63 - 1
_ITEM_TYPES = frozenset(Item.Type.values)

_HEX64 = re.compile("[0-9a-f]{64}")


@dataclass(slots=True)
class PendingItem:
    """An item about to be inserted: the columns of its Item row, by attribute name (see
    blobviewer.bulk_insert: a model instance per row costs more than all the rest)."""

    session_id: uuid.UUID
    seq: int
    type: str
    at: datetime | None
    text: str
    tool_calls: list[dict[str, Any]]
    call_id: str
    tool: str
    output: str
    is_error: bool
    role: str
    digest: str
    sidechain: bool
    output_bytes: int
    received_bytes: int
    input_tokens: int | None
    output_tokens: int | None
    context_tokens: int | None
    note: str
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    title: str = ""
    redactions: int = 0
    duration: timedelta | None = None
    id: int | None = None  # the row's pk, once inserted (a rebuild keeps the old one)

    @property
    def pk(self) -> int | None:
        return self.id

    def as_model(self) -> Item:
        """The Item this row is (for code that wants a model instance)."""
        return Item(**{name: getattr(self, name) for name in self.__slots__})


def item_row(
    session_id: uuid.UUID, source_path: str, record: Mapping[str, Any], *, pk: int | None = None
) -> PendingItem:
    """The row of *record* (with its final seq and digest); raises IngestError for a type
    that is no item's."""
    get = record.get
    kind = get("type")
    if kind not in _ITEM_TYPES:
        raise IngestError(source_path, None, f"seq {get('seq')}: bad type {kind!r}")
    output = str_or_empty(get("output"))
    output_bytes = utf8_size(output) if kind == Item.Type.TOOL_RESULT else 0
    received = get("received_bytes")
    if not isinstance(received, int) or isinstance(received, bool) or received < 0:
        received = output_bytes
    return PendingItem(
        session_id,
        record["seq"],
        str(kind),
        storable_time(get("at")),
        storable_text(get("text")),
        storable_json(_tool_calls(get("tool_calls"))),
        storable_text(get("call_id"))[:200],
        storable_text(get("tool"))[:200],
        storable(output),
        get("is_error") is True,
        storable_text(get("role"))[:50],
        str_or_empty(get("digest")),
        get("sidechain") is True,
        output_bytes,
        received,
        stored_tokens(get("input_tokens")),
        stored_tokens(get("output_tokens")),
        stored_tokens(get("context_tokens")),
        storable_text(get("note")),
        title=storable_text(get("title"))[:200],
        redactions=_count(get("redactions")),
        cache_read_tokens=stored_tokens(get("cache_read_tokens")),
        cache_write_tokens=stored_tokens(get("cache_write_tokens")),
        cost_usd=stored_cost(get("cost_usd")),
        id=pk,
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


# --- digests ----------------------------------------------------------------------------


def with_digests(records: Sequence[Mapping[str, Any]], source_format: str) -> list[dict[str, Any]]:
    """*records* as recorded (see _as_recorded), each with its `digest`: the importer's
    `source_digest` for another agent's recording, else (our own logs, or an importer
    that gives none) the digest of the record as it is, which for our log is the line."""
    keyed = []
    for record in map(_as_recorded, records):
        source = record.get("source_digest")
        data = {key: value for key, value in record.items() if key != "source_digest"}
        if source_format != OUR_FORMAT and isinstance(source, str) and _HEX64.fullmatch(source):
            data["digest"] = source
        else:
            data["digest"] = _digest(record)
        keyed.append(data)
    return keyed


def _as_recorded(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """*record* without the fields only ingest itself may set: a log cannot claim what
    its tool outputs weighed before promotion."""
    if "received_bytes" not in record:
        return record
    return {key: value for key, value in record.items() if key != "received_bytes"}


def _digest(record: Mapping[str, Any]) -> str:
    try:
        canonical = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # lone surrogates or huge ints: the stdlib writes them escaped
        canonical = json.dumps(record, sort_keys=True, ensure_ascii=True).encode()
    return hashlib.sha256(canonical).hexdigest()


# --- values a column holds ----------------------------------------------------------------


def session_created_at(
    header: Mapping[str, Any], session_id: uuid.UUID, *, kept: datetime | None = None
) -> datetime:
    """The header's time; else *kept* (an existing session keeps its time), else the
    session id's (UUID v7), else now: a timeless recording sorts by when it was ingested."""
    parsed = storable_time(header.get("created_at"))
    return parsed or kept or blob_created_at(session_id) or timezone.now()


def storable_time(value: Any) -> datetime | None:
    """*value* (a datetime, or ISO 8601 text) as an aware UTC time a database holds;
    None when it is none, or out of range."""
    if isinstance(value, datetime):
        parsed: datetime | None = value
    elif isinstance(value, str):
        try:
            parsed = parse_datetime(value.strip())
        except ValueError:
            parsed = None
    else:
        parsed = None
    if parsed is None:
        return None
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    try:
        parsed = parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
    # Databases hold years 1-9999; keep a margin so no time zone takes it out of range.
    return parsed if 2 <= parsed.year <= 9998 else None


def stored_tokens(value: Any) -> int | None:
    """A token count a database column holds, else None (not recorded)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_BIGINT:
        return None
    return value


def stored_cost(value: Any) -> float | None:
    """A cost in dollars a database column holds (a finite number, not negative), else
    None (not recorded)."""
    cost = finite_number(value)
    return cost if cost is not None and cost >= 0 else None


def stored_usage(record: Mapping[str, Any]) -> dict[str, int | float | None]:
    """*record*'s USAGE_FIELDS as its row holds them."""
    usage: dict[str, int | float | None] = {
        name: stored_tokens(record.get(name)) for name in TOKEN_FIELDS
    }
    usage["cost_usd"] = stored_cost(record.get("cost_usd"))
    return usage


def storable_text(value: Any) -> str:
    """storable(value) for a str, "" for anything else: the common case in one call."""
    if not isinstance(value, str):
        return ""
    return storable(value)


def storable_json(value: Any) -> Any:
    """*value* with storable strings (and keys). Most values have nothing to replace:
    orjson, which refuses a lone surrogate, writes them without a NUL (escaped `\\u0000`)
    many times faster than this function walks them, and they come back as they are."""
    if isinstance(value, list | dict):
        try:
            if b"\\u0000" not in orjson.dumps(value):
                return value
        except TypeError:  # a lone surrogate, a key that is no string, a huge int
            pass
    return storable_walk(value)


def storable_walk(value: Any) -> Any:
    """storable_json, walking every value (what it does when orjson cannot tell)."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        return [storable_walk(v) for v in value]
    if isinstance(value, dict):
        return {storable(str(k)): storable_walk(v) for k, v in value.items()}
    return value


def _tool_calls(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [_call(call) for call in value if isinstance(call, dict)]


def _call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A call as an item keeps it: id, tool name, arguments, and the `title` an importer
    may give it where the arguments say little (a Codex poll: `npm test · poll 2`, with the
    id of the call it `polls`)."""
    kept = {
        "id": str_or_empty(call.get("id")),
        "name": str_or_empty(call.get("name")),
        "arguments": call.get("arguments", {}),
    }
    if title := str_or_empty(call.get("title"))[:200]:
        kept["title"] = title
    if polls := str_or_empty(call.get("polls"))[:200]:
        kept["polls"] = polls  # the call whose command this one reads on (its id)
    return kept


# --- blob references ------------------------------------------------------------------------


def blob_refs_of(item: Item | PendingItem) -> list[uuid.UUID]:
    """The blobs *item*'s text and output name, each once, in order."""
    refs = find_blob_refs(item.text)
    for blob_id in find_blob_refs(item.output):
        if blob_id not in refs:
            refs.append(blob_id)
    return refs


def promoted_blob_id(item: Item | PendingItem) -> uuid.UUID | None:
    """The blob a promoted tool output's summary names; None for inline outputs.

    An inspect result also starts with `[blob:<id>]`, but it is what the model read, never
    promoted, so it is its own size.
    """
    if item.type != Item.Type.TOOL_RESULT:
        return None
    return promoted_output_blob(item.tool, item.output)


def promoted_text_blob(item: Item | PendingItem) -> uuid.UUID | None:
    """The blob a promoted tool output or message went to: promoted_blob_id, or for a
    message whose text is a summary (the OTLP receiver promotes big ones), the blob it
    names first."""
    if item.type == Item.Type.TOOL_RESULT:
        return promoted_blob_id(item)
    match = BLOB_REF.match(item.text)
    return uuid.UUID(match.group(1)) if match else None


def promoted_output_blob(tool: str, output: str) -> uuid.UUID | None:
    """promoted_blob_id of a tool result known by its *tool* and *output* alone."""
    match = BLOB_REF.match(output) if tool != "inspect" else None
    return uuid.UUID(match.group(1)) if match else None
