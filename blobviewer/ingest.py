"""Ingest recorded sessions into the database: sessions, items, blob links, blob facts.

`ingest_session(header, records, ...)` is the one entry point that writes; it takes a
session header and item records in the session log's shape (SPEC 2.10), so an importer for
another agent's format only has to produce those. `ingest_file(path)` recognises a file's
format by its content: our own session logs, or another agent's recording (see
blobviewer.importers). Both are idempotent: items are keyed by (session, seq), so
ingesting a log again, or after it grew, adds only the new items.

Tool outputs that a recording kept whole go through core's promotion on the way in, as a
live Worker would have done: over the threshold, the output is stored as a blob and the
item keeps its summary. Only new items are promoted, so re-ingesting stores nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from django.db import DatabaseError, transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from blobviewer.blob_index import index_blobs
from blobviewer.importers import (
    OUR_FORMAT,
    RecordingError,
    UnknownFormat,
    load_sniffed,
    read_bytes,
    sniff,
)
from blobviewer.models import Blob, BlobRef, Item, PrunedSession, Session
from blobviewer.retention import session_pruned_message
from core.blob_errors import BlobStoreError
from core.blob_id import BLOB_REF, blob_created_at, find_blob_refs
from core.blob_store import FsBlobStore
from core.content import Stored, utf8_size
from core.policy import DEFAULT_POLICY, Policy
from core.promotion import admit_sync, promote
from core.session_log import MAX_SEQ, SessionLogError, parse_session_log

_BATCH = 500

# Databases cannot hold every str Python can: PostgreSQL refuses NUL in text and JSON, and
# neither database encodes lone surrogates. The log file keeps the original; the index
# keeps a visible stand-in.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class IngestError(Exception):
    """A session could not be ingested; nothing of it was written. Reads `path:line: msg`."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class IngestResult:
    session_id: uuid.UUID
    path: str
    new_items: int
    total_items: int
    new_blob_refs: int
    blobs: int
    missing_blobs: int
    torn_tail: bool = False
    stored_blobs: tuple[uuid.UUID, ...] = ()  # the outputs this call promoted into the store


class NotARecording(IngestError):
    """The file is in no format blobviewer reads (a folder scan skips such files)."""


class SessionPruned(IngestError):
    """The session was deleted by `manage.py prune`; it is ingested again only when forced.
    Reads `path: skipped: session <id> was pruned on DATE; use --force to ingest it again`."""

    def __init__(self, path: str, tombstone: PrunedSession) -> None:
        super().__init__(path, None, session_pruned_message(tombstone.id, tombstone.pruned_at))
        self.tombstone = tombstone


def ingest_file(path: Path, *, store: FsBlobStore, force: bool = False) -> IngestResult:
    """Ingest a session log or another agent's recording, recognised by its content.

    A torn last line of a session log is skipped, to be read once it is complete. A pruned
    session raises SessionPruned unless *force* (see ingest_session).
    """
    try:
        data = read_bytes(path)
        kind, document = sniff(path, data)
        if kind != OUR_FORMAT:
            recording = load_sniffed(path, data, kind, document)
    except UnknownFormat as error:
        raise NotARecording(str(path), error.line, error.message) from None
    except RecordingError as error:
        raise IngestError(str(path), error.line, error.message) from None
    if kind != OUR_FORMAT:
        return ingest_session(
            recording.header,
            recording.records,
            source_path=str(path),
            store=store,
            source_format=recording.format,
            force=force,
        )
    try:
        log = parse_session_log(data, path)
    except SessionLogError as error:
        raise IngestError(str(path), error.line or None, error.message) from None
    result = ingest_session(
        log.header, log.records, source_path=str(path), store=store, force=force
    )
    if log.torn_tail:
        result = IngestResult(**{**result.__dict__, "torn_tail": True})
    return result


def ingest_session(
    header: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    *,
    source_path: str,
    store: FsBlobStore,
    source_format: str = OUR_FORMAT,
    policy: Policy = DEFAULT_POLICY,
    force: bool = False,
) -> IngestResult:
    """Upsert a session and add the records whose seq it does not have yet, atomically.

    *header* has `id` (a UUID), `created_at` (ISO 8601), `title`, `model`, `meta`.
    Each record has `type` (user, assistant, tool_result), `seq`, `at`, and the item's
    fields (importers may add `role` and `sidechain`). Outputs kept whole are promoted
    here, which also records how big they were (`received_bytes` in a record is ignored).

    Files are written and read (promotion, blob facts) before the transaction, so the
    database is not held locked meanwhile; if anything fails, the blobs this call stored
    are discarded again, so a failed ingest leaves nothing behind.

    A session deleted by `manage.py prune` raises SessionPruned and nothing is written;
    with *force* its tombstone goes (with the transaction) and it is ingested again.
    """
    session_id = _session_id(header, source_path)
    if not force:
        _check_not_pruned(session_id, source_path)
    _check_unique_seqs(records, source_path)
    known = _check_same_session(session_id, records, source_format, source_path)
    written: list[uuid.UUID] = []
    try:
        new_records = [
            {
                **_promoted(
                    record, store=store, policy=policy, source_path=source_path, written=written
                ),
                "digest": _digest(record),
            }
            for record in map(_as_recorded, records)
            if record["seq"] not in known
        ]
        referenced = {
            blob_id
            for record in new_records
            for field in ("text", "output")
            for blob_id in find_blob_refs(_text(record.get(field)))
        }
        blobs = index_blobs(referenced, store=store)
        with transaction.atomic():
            session, _ = Session.objects.update_or_create(
                id=session_id,
                defaults={
                    "title": _storable(str(header.get("title") or ""))[:500],
                    "model": _storable(str(header.get("model") or ""))[:200],
                    "meta": _storable_json(header.get("meta") or {}),
                    "created_at": _created_at(header, session_id),
                    "source_path": source_path[:1000],
                    "source_format": source_format,
                },
            )
            # Again under the session row's lock: a prune that committed meanwhile wins.
            if force:
                PrunedSession.objects.filter(id=session_id).delete()
            else:
                _check_not_pruned(session_id, source_path)
            items = Item.objects.bulk_create(
                [_item(session, record) for record in new_records], batch_size=_BATCH
            )
            refs_by_item = {item: _refs(item) for item in items}
            BlobRef.objects.bulk_create(
                [
                    BlobRef(item=item, session=session, blob=blobs[blob_id])
                    for item, refs in refs_by_item.items()
                    for blob_id in refs
                ],
                batch_size=_BATCH,
            )
            unsized = [
                item
                for item, record in zip(items, new_records, strict=True)
                if "received_bytes" not in record
            ]
            _set_received_bytes(session, unsized, blobs)
            _update_totals(session)
    except BaseException as error:
        for blob_id in written:
            store.discard_sync(blob_id)
        Blob.objects.filter(id__in=written).delete()
        if isinstance(error, DatabaseError):
            message = f"the database refused it ({error}); nothing was recorded"
            raise IngestError(source_path, None, message) from None
        raise
    return IngestResult(
        session_id=session.id,
        path=source_path,
        new_items=len(items),
        total_items=session.item_count,
        new_blob_refs=sum(len(refs) for refs in refs_by_item.values()),
        blobs=session.blob_count,
        missing_blobs=sum(1 for blob in blobs.values() if blob.missing),
        stored_blobs=tuple(written),
    )


RECORDING_SUFFIXES = (".jsonl", ".json", ".traj")


def recording_paths(paths: Iterable[Path]) -> list[tuple[Path, bool]]:
    """(path, named) pairs: files as given (named), and the files of folders, searched
    recursively for recording-like names, in name order. Hidden entries and blob stores
    (folders named `blobs`, whose `.json` files are blobs, not recordings) are passed over.
    """
    found: list[tuple[Path, bool]] = []
    for path in paths:
        if not path.is_dir():
            found.append((path, True))
            continue
        for candidate in sorted(path.rglob("*")):
            parts = candidate.relative_to(path).parts
            if (
                candidate.suffix in RECORDING_SUFFIXES
                and candidate.is_file()
                and not any(part.startswith(".") or part == "blobs" for part in parts[:-1])
                and not parts[-1].startswith(".")
            ):
                found.append((candidate, False))
    return found


def _promoted(
    record: Mapping[str, Any],
    *,
    store: FsBlobStore,
    policy: Policy,
    source_path: str,
    written: list[uuid.UUID],
) -> Mapping[str, Any]:
    """*record*, its tool output promoted when the recording kept a big one whole.

    An output that already starts with `[blob:<id>]` is a summary our Worker wrote, or an
    inspect result (never promoted), and passes as it is.
    """
    output = record.get("output")
    if record.get("type") != "tool_result" or not isinstance(output, str):
        return record
    if BLOB_REF.match(output):
        return record
    promoted = promote(output, policy)
    if not isinstance(promoted, Stored):
        return record
    try:
        admitted = admit_sync(promoted, store, policy)
    except BlobStoreError as error:
        seq = record.get("seq")
        raise IngestError(
            source_path, None, f"seq {seq}: cannot store its output: {error}"
        ) from None
    if admitted.blob_id is not None:
        written.append(admitted.blob_id)
    return {**record, "output": admitted.text, "received_bytes": utf8_size(output)}


# --- helpers -------------------------------------------------------------------------------


def _session_id(header: Mapping[str, Any], source_path: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(header.get("id", "")))
    except ValueError:
        raise IngestError(source_path, 1, "session id must be a UUID") from None


def _check_not_pruned(session_id: uuid.UUID, source_path: str) -> None:
    tombstone = PrunedSession.objects.filter(id=session_id).first()
    if tombstone is not None:
        raise SessionPruned(source_path, tombstone)


def _check_unique_seqs(records: Sequence[Mapping[str, Any]], source_path: str) -> None:
    seen: set[int] = set()
    for index, record in enumerate(records):
        seq = record.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= MAX_SEQ:
            raise IngestError(
                source_path, None, f"item {index + 1}: seq must be an integer from 1 to {MAX_SEQ}"
            )
        if seq in seen:
            raise IngestError(source_path, None, f"seq {seq} appears more than once")
        seen.add(seq)


def _check_same_session(
    session_id: uuid.UUID,
    records: Sequence[Mapping[str, Any]],
    source_format: str,
    source_path: str,
) -> set[int]:
    """The seqs already recorded for this session, after checking that *records* continue
    that session rather than being another recording that claims its id."""
    existing = Session.objects.filter(id=session_id).values("source_format", "source_path").first()
    if existing is None:
        return set()
    if existing["source_format"] != source_format:
        raise IngestError(
            source_path,
            None,
            f"session {session_id} is already recorded from a {existing['source_format']} "
            f"recording ({existing['source_path']}); this is a {source_format} one",
        )
    recorded = dict(Item.objects.filter(session_id=session_id).values_list("seq", "digest"))
    for record in map(_as_recorded, records):
        digest = recorded.get(record["seq"])
        if digest and digest != _digest(record):
            raise IngestError(
                source_path,
                None,
                f"seq {record['seq']} differs from session {session_id} as already recorded "
                f"from {existing['source_path']}: is this another run with the same id?",
            )
    return set(recorded)


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


def _created_at(header: Mapping[str, Any], session_id: uuid.UUID) -> datetime:
    parsed = _datetime(header.get("created_at"))
    return parsed or blob_created_at(session_id) or timezone.now()


def _datetime(value: Any) -> datetime | None:
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


def _item(session: Session, record: Mapping[str, Any]) -> Item:
    kind = record.get("type")
    if kind not in Item.Type.values:
        raise IngestError(session.source_path, None, f"seq {record.get('seq')}: bad type {kind!r}")
    output = _text(record.get("output"))
    output_bytes = utf8_size(output) if kind == Item.Type.TOOL_RESULT else 0
    received = record.get("received_bytes")
    if not isinstance(received, int) or isinstance(received, bool) or received < 0:
        received = output_bytes
    return Item(
        session=session,
        seq=record["seq"],
        type=kind,
        at=_datetime(record.get("at")),
        text=_storable(_text(record.get("text"))),
        tool_calls=_storable_json(_tool_calls(record.get("tool_calls"))),
        call_id=_storable(_text(record.get("call_id")))[:200],
        tool=_storable(_text(record.get("tool")))[:200],
        output=_storable(output),
        is_error=record.get("is_error") is True,
        role=_storable(_text(record.get("role")))[:50],
        digest=_text(record.get("digest")),
        sidechain=record.get("sidechain") is True,
        output_bytes=output_bytes,
        received_bytes=received,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _tool_calls(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [
        {
            "id": _text(call.get("id")),
            "name": _text(call.get("name")),
            "arguments": call.get("arguments", {}),
        }
        for call in value
        if isinstance(call, dict)
    ]


def _storable(text: str) -> str:
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: "\u2400" if m.group() == "\x00" else "\ufffd", text)


def _storable_json(value: Any) -> Any:
    if isinstance(value, str):
        return _storable(value)
    if isinstance(value, list):
        return [_storable_json(v) for v in value]
    if isinstance(value, dict):
        return {_storable(str(k)): _storable_json(v) for k, v in value.items()}
    return value


def _refs(item: Item) -> list[uuid.UUID]:
    refs = find_blob_refs(item.text)
    for blob_id in find_blob_refs(item.output):
        if blob_id not in refs:
            refs.append(blob_id)
    return refs


def _promoted_blob(item: Item) -> uuid.UUID | None:
    """The blob a promoted tool output's summary names; None for inline outputs.

    An inspect result also starts with `[blob:<id>]`, but it is what the model read, never
    promoted, so it is its own size.
    """
    if item.type != Item.Type.TOOL_RESULT or item.tool == "inspect":
        return None
    match = BLOB_REF.match(item.output)
    return uuid.UUID(match.group(1)) if match else None


def _set_received_bytes(
    session: Session, new_items: list[Item], blobs: Mapping[uuid.UUID, Blob]
) -> None:
    """Received bytes of promoted outputs: the blob's size, once the store has the blob.

    Also revisits older items of the session whose blob was missing when they were
    ingested and has turned up since.
    """
    candidates = list(new_items)
    found_late = [blob_id for blob_id, blob in blobs.items() if not blob.missing]
    if found_late:
        candidates += (
            Item.objects.filter(
                session=session, type=Item.Type.TOOL_RESULT, blob_refs__blob__in=found_late
            )
            .exclude(pk__in=[item.pk for item in new_items])
            .exclude(tool="inspect")
            .filter(received_bytes=F("output_bytes"))
            .only("pk", "type", "tool", "output", "output_bytes", "received_bytes")
        )
    changed = []
    for item in candidates:
        blob_id = _promoted_blob(item)
        if blob_id is None:
            continue
        blob = blobs.get(blob_id) or Blob.objects.filter(id=blob_id, missing=False).first()
        if blob is None or blob.missing or blob.size is None:
            continue
        if item.received_bytes != blob.size:
            item.received_bytes = blob.size
            changed.append(item)
    Item.objects.bulk_update(changed, ["received_bytes"], batch_size=_BATCH)


def _update_totals(session: Session) -> None:
    totals = Item.objects.filter(session=session).aggregate(
        items=Count("pk"),
        tool_results=Count("pk", filter=Q(type=Item.Type.TOOL_RESULT)),
        in_history=Sum("output_bytes"),
        received=Sum("received_bytes"),
    )
    session.item_count = totals["items"]
    session.tool_result_count = totals["tool_results"]
    session.output_bytes_in_history = totals["in_history"] or 0
    session.output_bytes_received = totals["received"] or 0
    session.blob_count = (
        BlobRef.objects.filter(session=session).values("blob_id").distinct().count()
    )
    session.save(
        update_fields=[
            "item_count",
            "tool_result_count",
            "output_bytes_in_history",
            "output_bytes_received",
            "blob_count",
            "updated_at",
        ]
    )
