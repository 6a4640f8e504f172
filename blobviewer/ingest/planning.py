"""What an ingest adds to a session, decided before anything is written: the checks that
the records continue the session as recorded (its id, owner, format, importer version and
items), and the plan of items to add, to re-derive in place (a rebuild) and to remove.

Our own logs number their items themselves (their seqs are the items' seqs); another
agent's recording is numbered by ingest: items already recorded keep their seq (matched
by digest), new ones get the seqs after the largest, so `/sessions/<id>/items/<seq>/`
links keep pointing at the same item (docs/recording.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

from django.db import connection
from django.db.models import Model

from blobviewer.ingest.errors import (
    IngestError,
    NotResumable,
    OutdatedSession,
    SessionPruned,
    owned_by_another,
)
from blobviewer.ingest.importers import OUR_FORMAT
from blobviewer.ingest.options import IngestOptions
from blobviewer.ingest.rows import USAGE_FIELDS, promoted_text_blob, stored_usage
from blobviewer.models import Item, PrunedSession, Session
from core.agent.session_log import MAX_SEQ
from core.store.blob_id import blob_created_at

Records = list[dict[str, Any]]


@dataclass(frozen=True)
class RecordedRow:
    """An item already recorded, as planning compares it."""

    pk: int
    seq: int
    digest: str
    type: str
    is_error: bool
    input_tokens: int | None
    output_tokens: int | None
    context_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cost_usd: float | None


@dataclass(frozen=True)
class IngestPlan:
    """What an ingest does to a session's items. Every record carries its final seq."""

    new: Records = field(default_factory=list)  # items to add
    # A rebuild: records that rewrite the item of their seq, that item's pk, and the blob
    # its output was promoted to (kept when the new output is the same).
    rederived: Records = field(default_factory=list)
    item_pks: dict[int, int] = field(default_factory=dict)
    old_blobs: dict[int, uuid.UUID] = field(default_factory=dict)
    removed: list[int] = field(default_factory=list)  # pks of items no longer derived
    # Items already recorded whose tokens the recording now says more about (Claude Code
    # adds an API message's final usage with its last line): pk -> USAGE_FIELDS.
    grown_tokens: dict[int, dict[str, int | float | None]] = field(default_factory=dict)
    # Items already recorded that the recording now says failed (a Codex command whose exit
    # a later poll reported): their pks.
    failed_since: list[int] = field(default_factory=list)
    kept_created_at: datetime | None = None  # when the header has no time
    rebuild: bool = False
    first: bool = False  # the session has no items yet: every item is new
    new_session: bool = False  # nor a row


# --- the session -----------------------------------------------------------------------------


def header_session_id(header: Mapping[str, Any], source_path: str) -> uuid.UUID:
    """The session id a header gives; raises IngestError when it is no UUID."""
    try:
        return uuid.UUID(str(header.get("id", "")))
    except ValueError:
        raise IngestError(source_path, 1, "session id must be a UUID") from None


def pruned_or_recorded(session_id: uuid.UUID) -> tuple[bool, bool]:
    """Whether the session was pruned (a tombstone has its id) and whether it is recorded
    (a session row has it), in one query."""
    quote = connection.ops.quote_name
    pruned_table, session_table = (
        f"{quote(model._meta.db_table)} WHERE {quote(model._meta.pk.column)} = %s"
        for model in (PrunedSession, Session)
    )
    value = Session._meta.pk.get_db_prep_value(session_id, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {pruned_table}), EXISTS (SELECT 1 FROM {session_table})",
            [value, value],
        )
        pruned, recorded = cursor.fetchone()
    return bool(pruned), bool(recorded)


def check_not_pruned(session_id: uuid.UUID, source_path: str) -> None:
    """Raise SessionPruned if `manage.py prune` deleted the session."""
    if not _has_row(PrunedSession, session_id):
        return
    tombstone = PrunedSession.objects.filter(id=session_id).first()
    if tombstone is not None:
        raise SessionPruned(source_path, tombstone)


def _has_row(model: type[Model], pk: uuid.UUID) -> bool:
    """Whether *model* has a row with primary key *pk*: a query in plain SQL, as ingest
    asks this a few times a file and the ORM takes ten times as long to ask it."""
    meta = model._meta
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {quote(meta.db_table)} WHERE {quote(meta.pk.column)} = %s",
            [meta.pk.get_db_prep_value(pk, connection)],
        )
        return cursor.fetchone() is not None


# --- seqs ------------------------------------------------------------------------------------


def check_seqs(records: Sequence[Mapping[str, Any]], source_path: str) -> None:
    """Raise IngestError unless every record has a seq from 1 to MAX_SEQ, each once."""
    for index, record in enumerate(records):
        seq = record.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= MAX_SEQ:
            raise IngestError(
                source_path, None, f"item {index + 1}: seq must be an integer from 1 to {MAX_SEQ}"
            )
    repeat = repeated_seq(records)
    if repeat is not None:
        raise IngestError(source_path, None, f"seq {repeat[0]} appears more than once")


def repeated_seq(records: Iterable[Mapping[str, Any]]) -> tuple[int, int, int] | None:
    """The first seq that a record repeats, as (seq, that record's index, the index of the
    first record with it); None when every seq is another. A session's seqs are unique."""
    first: dict[int, int] = {}
    for index, record in enumerate(records):
        seq = record["seq"]
        if seq in first:
            return seq, index, first[seq]
        first[seq] = index
    return None


# --- the plan --------------------------------------------------------------------------------


def plan_ingest(
    session_id: uuid.UUID,
    records: Records,
    *,
    source_format: str,
    source_path: str,
    version: int,
    recorded: bool,
    options: IngestOptions,
    earlier: Records | None = None,
) -> IngestPlan:
    """What to do with *records* (with their digests, see rows.with_digests): after
    checking that they continue that session rather than being another recording that
    claims its id, that the session is no other user's than the options' owner's, and that
    its importer version is *version* (else OutdatedSession, unless a rebuild re-derives
    it). The messages name no server path (the upload API passes them on): where the
    session was recorded from is in the detail. *recorded* False: a query just found no
    session row with the id (no need to look again). *earlier* (a read that resumed, see
    Recording.earlier): *records* are only what the new lines add; raises NotResumable
    when they do not fit the session as recorded."""
    existing = _existing(session_id) if recorded else None
    if existing is None:
        if earlier is not None:
            raise NotResumable(f"{source_path}: session {session_id} is not recorded")
        return IngestPlan(new=list(records), first=True, new_session=True)
    recorded_from = f"recorded from {existing['source_path']}" if existing["source_path"] else ""
    owner = options.owner
    theirs = existing["owner_id"] is not None or options.claimed_only
    if owner is not None and existing["owner_id"] != owner.pk and theirs:
        raise owned_by_another(session_id, source_path, existing["owner_id"])
    if existing["source_format"] != source_format:
        raise IngestError(
            source_path,
            None,
            f"session {session_id} is already recorded from a {existing['source_format']} "
            f"recording; this is a {source_format} one",
            detail=recorded_from,
        )
    rows = _recorded_rows(session_id)
    if earlier is not None and not rows and (earlier or records and records[0]["seq"] != 1):
        raise NotResumable(f"{source_path}: session {session_id} has no items to go on from")
    if not rows:  # a session not filled in yet (an upload's claim): anything goes in
        return IngestPlan(new=list(records), kept_created_at=existing["created_at"], first=True)
    differs = partial(_differs, session_id, source_path, recorded_from)
    recorded_version = existing["importer_version"]
    authored = source_format == OUR_FORMAT  # our logs number their items themselves
    if recorded_version < version and options.rebuild:
        # A timeless recording sorted by the file's mtime before; now by when it ran, if
        # the id says (our UUID v7 session ids), else by when it was first ingested.
        kept = blob_created_at(session_id) or existing["ingested_at"]
        legacy = recorded_version == 0
        plan = _rebuild_plan(records, rows, authored=authored, legacy=legacy, differs=differs)
        return _with_old_blobs(replace(plan, kept_created_at=kept))
    if recorded_version != version:
        raise OutdatedSession(source_path, session_id, source_format, recorded_version, version)
    if earlier is not None:
        plan = _resumed_plan(records, earlier, rows, source_path)
    else:
        plan = (_authored_plan if authored else _grown_plan)(records, rows, differs)
    return replace(plan, kept_created_at=existing["created_at"])


def _existing(session_id: uuid.UUID) -> dict[str, Any] | None:
    """What planning needs of the session's row, if it has one."""
    return (
        Session.objects.filter(id=session_id)
        .values(
            "source_format",
            "source_path",
            "owner_id",
            "importer_version",
            "created_at",
            "ingested_at",
        )
        .first()
    )


def _recorded_rows(session_id: uuid.UUID) -> list[RecordedRow]:
    return [
        RecordedRow(*row)
        for row in Item.objects.filter(session_id=session_id)
        .order_by("seq")
        .values_list("pk", "seq", "digest", "type", "is_error", *USAGE_FIELDS)
    ]


def _differs(session_id: uuid.UUID, source_path: str, recorded_from: str, seq: int) -> IngestError:
    return IngestError(
        source_path,
        None,
        f"seq {seq} differs from session {session_id} as already recorded: "
        "is this another run with the same id?",
        detail=recorded_from,
    )


def _authored_plan(
    records: Records, rows: list[RecordedRow], differs: Callable[[int], IngestError]
) -> IngestPlan:
    """Our own log: a seq already recorded must be the same record; the others are new."""
    by_seq = {row.seq: row for row in rows}
    for record in records:
        row = by_seq.get(record["seq"])
        if row is not None and row.digest and row.digest != record["digest"]:
            raise differs(record["seq"])
    return IngestPlan(
        new=[record for record in records if record["seq"] not in by_seq],
        grown_tokens=_grown_tokens(records, by_seq, "seq"),
    )


def _grown_plan(
    records: Records, rows: list[RecordedRow], differs: Callable[[int], IngestError]
) -> IngestPlan:
    """Another agent's recording may only have grown: the items already recorded come
    first, in their order, and every one of them is still there when anything is new."""
    by_digest = {row.digest: row for row in rows}
    known = 0
    while known < len(records) and records[known]["digest"] in by_digest:
        known += 1
    new = records[known:]
    if new:
        seen = {records[index]["digest"] for index in range(known)}
        missing = [row.seq for row in rows if row.digest not in seen]
        again = [by_digest[r["digest"]].seq for r in new if r["digest"] in by_digest]
        if missing or again:
            raise differs(min(missing or again))
    return IngestPlan(
        new=_numbered(new, after=max(row.seq for row in rows)),
        grown_tokens=_grown_tokens(records[:known], by_digest, "digest"),
        failed_since=_failed_since(records[:known], by_digest),
    )


def _resumed_plan(
    records: Records, earlier: Records, rows: list[RecordedRow], source_path: str
) -> IngestPlan:
    """Another agent's recording read on from where its last ingest ended: *records* are
    all new, *earlier* the recorded items the new lines changed (the same plan as
    _grown_plan's for the whole file)."""
    by_digest = {row.digest: row for row in rows}
    if any(record["digest"] in by_digest for record in records) or any(
        record["digest"] not in by_digest for record in earlier
    ):
        raise NotResumable(f"{source_path}: the new lines do not go on from the recorded items")
    return IngestPlan(
        new=_numbered(records, after=max(row.seq for row in rows)),
        grown_tokens=_grown_tokens(earlier, by_digest, "digest"),
        failed_since=_failed_since(earlier, by_digest),
    )


def _failed_since(records: Records, recorded: Mapping[str, RecordedRow]) -> list[int]:
    """The pks of the recorded items that *records* (each recorded) now say failed."""
    failed = {
        row.pk
        for record in records
        if record.get("is_error") is True and not (row := recorded[record["digest"]]).is_error
    }
    return sorted(failed)


def _rebuild_plan(
    records: Records,
    rows: list[RecordedRow],
    *,
    authored: bool,
    legacy: bool,
    differs: Callable[[int], IngestError],
) -> IngestPlan:
    """Match the re-derived *records* to the recorded *rows*: our own logs by seq (their
    lines never go away, so nothing is removed); sessions recorded before digests were
    over source records (importer version 0, *legacy*) by seq and type, which is where the
    old importers put them; any other by digest."""
    by_seq = {row.seq: row for row in rows}
    matched: dict[int, RecordedRow] = {}  # index in records -> the row it re-derives
    if authored:
        for index, record in enumerate(records):
            row = by_seq.get(record["seq"])
            if row is not None:
                if row.digest and row.digest != record["digest"]:
                    raise differs(record["seq"])
                matched[index] = row
    elif legacy:
        for index, record in enumerate(records):
            row = by_seq.get(record["seq"])
            if row is not None and row.type == record.get("type"):
                matched[index] = row
    else:
        by_digest = {row.digest: row for row in rows}
        matched = {
            index: by_digest[record["digest"]]
            for index, record in enumerate(records)
            if record["digest"] in by_digest
        }
        if not matched:  # not one item in common: not this session's recording
            raise differs(rows[0].seq)
    rederived = [{**records[index], "seq": row.seq} for index, row in matched.items()]
    unmatched = [record for index, record in enumerate(records) if index not in matched]
    if authored:
        new = unmatched  # our logs' seqs are their own
        removed: list[int] = []
    else:
        new = _numbered(unmatched, after=max(row.seq for row in rows))
        kept = {row.pk for row in matched.values()}
        removed = [row.pk for row in rows if row.pk not in kept]
    return IngestPlan(
        new=new,
        rederived=rederived,
        item_pks={row.seq: row.pk for row in matched.values()},
        removed=removed,
        rebuild=True,
    )


def _with_old_blobs(plan: IngestPlan) -> IngestPlan:
    """*plan* with the blob each re-derived item's old one was promoted to (a tool
    result's output, a message's text)."""
    pks = list(plan.item_pks.values())
    old = Item.objects.filter(pk__in=pks).only("pk", "seq", "type", "tool", "output", "text")
    blobs = {item.seq: blob for item in old if (blob := promoted_text_blob(item)) is not None}
    return replace(plan, old_blobs=blobs)


def _numbered(records: Records, *, after: int) -> Records:
    """*records* numbered after the largest seq recorded (seqs are never reused)."""
    return [{**record, "seq": after + n} for n, record in enumerate(records, start=1)]


def _grown_tokens(
    records: Records, recorded: Mapping[Any, RecordedRow], key: str
) -> dict[int, dict[str, int | float | None]]:
    grown = {}
    for record in records:
        row = recorded.get(record[key])
        if row is None or not any(name in record for name in USAGE_FIELDS):
            continue
        tokens = stored_usage(record)
        if any(getattr(row, name) != value for name, value in tokens.items()):
            grown[row.pk] = tokens
    return grown
