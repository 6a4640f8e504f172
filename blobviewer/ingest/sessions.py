"""Ingest recorded sessions into the database: sessions, items, blob links, blob facts.

`ingest_session(header, records, ...)` is the one entry point that writes; it takes a
session header and item records in the session log's shape (docs/session-log.md), so an
importer for another agent's format only has to produce those. `ingest_file(path)`
recognises a file's format by its content: our own session logs, or another agent's
recording (see blobviewer.ingest.importers). Both are idempotent: ingesting a log again, or
after it grew, adds only the new items (docs/recording.md).

Each item has a digest of where it came from: for another agent's recording, of its
source record (the importer's `source_digest`: a JSON Lines line, or one message or step
of a whole-document recording), never of what the importer made of it; for our own log,
of the line's record. So an importer that changes what it derives still knows which items
it recorded. Each session records the importer version that derived it
(`Session.importer_version`); a plain ingest of a session recorded by another version
appends nothing and says to run `manage.py ingest --rebuild`, which re-derives the
session's items from its recording in place (see ingest_session).

An ingest plans (blobviewer.ingest.planning), promotes new outputs on the way in
(blobviewer.ingest.promotion), makes the item rows (blobviewer.ingest.rows) and writes them
in one transaction (blobviewer.ingest.writing); search indexes the session after it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from django.db import DatabaseError, IntegrityError, connection

from blobviewer.catalog.blobs import catalog_blobs
from blobviewer.ingest.errors import IngestError
from blobviewer.ingest.importers import OUR_FORMAT, Recording, RecordingError, importer_version
from blobviewer.ingest.options import DEFAULT_OPTIONS, IngestOptions
from blobviewer.ingest.planning import (
    IngestPlan,
    check_not_pruned,
    check_seqs,
    header_session_id,
    plan_ingest,
    pruned_or_recorded,
)
from blobviewer.ingest.promotion import Promotions, size_promoted
from blobviewer.ingest.recording_files import Opened, open_recording
from blobviewer.ingest.rows import (
    blob_refs_of,
    item_row,
    storable_time,
    stored_cost,
    with_digests,
)
from blobviewer.ingest.writing import SessionWrite, session_fields, write_session
from blobviewer.search.folding import storable
from blobviewer.search.indexing import index_session
from core.agent.session_log import SessionLog
from core.redaction import redact_item
from core.store import BlobStore


@dataclass(frozen=True)
class IngestResult:
    """What ingesting one session did: the items and blob links it added, the session's
    totals after it, and the blobs it stored."""

    session_id: uuid.UUID
    path: str
    new_items: int
    total_items: int
    new_blob_refs: int
    blobs: int
    missing_blobs: int
    torn_tail: bool = False
    stored_blobs: tuple[uuid.UUID, ...] = ()  # the outputs this call promoted into the store
    rebuilt: bool = False  # the session's items were re-derived (a rebuild)
    rederived_items: int = 0  # rebuild: items re-derived in place, under their own seq
    removed_items: int = 0  # rebuild: items the importer no longer derives (a gap in seqs)
    reused_blobs: int = 0  # rebuild: re-derived outputs equal to their old blob, kept as is


def ingest_file(
    path: Path, *, store: BlobStore, options: IngestOptions = DEFAULT_OPTIONS
) -> IngestResult:
    """Ingest a session log or another agent's recording, recognised by its content (a
    conversation folder, see blobviewer.ingest.importers.folder_layout, is one recording).

    A torn last line of a session log is skipped, to be read once it is complete. A pruned
    session raises SessionPruned unless the options force it (see ingest_session). A file
    of several runs, each a session of its own (an OpenHands evaluation output), raises
    IngestError: ingest_recordings takes those.
    """
    opened = open_recording(path)
    if opened.runs is not None:
        message = (
            f"holds {len(opened.runs)} sessions (an evaluation output's runs, or a "
            "trajectory and its sub-agents): ingest it with manage.py ingest"
        )
        raise IngestError(str(path), None, message)
    return _ingest_one(path, opened.session, store=store, options=options)


def ingest_recordings(
    path: Path,
    *,
    store: BlobStore,
    options: IngestOptions = DEFAULT_OPTIONS,
    opened: Opened | None = None,
) -> list[tuple[str, IngestResult | IngestError]]:
    """Ingest every session *path* holds: `[("", result)]` for a file or folder that is
    one recording (as ingest_file, whose errors it raises), or, for an OpenHands
    evaluation output, one `(label, outcome)` for each run, in line order: *label* names
    the run (`line 3 (django__django-1)`; a trajectory's sub-agent: `sub-agent NAME`, the
    trajectory itself ""), *outcome* is its IngestResult, or the
    IngestError that skipped that run only (a damaged line reads `path:line: message`).
    *opened* is what open_recording read of *path*, if the caller read it already (to
    keep a copy of what was ingested)."""
    if opened is None:
        opened = open_recording(path)
    if opened.runs is None:
        return [("", _ingest_one(path, opened.session, store=store, options=options))]
    outcomes: list[tuple[str, IngestResult | IngestError]] = []
    for number, run in opened.runs:
        if isinstance(run, RecordingError):
            outcomes.append((f"line {number}", IngestError(run.path, run.line, run.message)))
            continue
        label = (
            run.label
            if number == 0
            else f"line {number} ({run.header['meta'].get('instance_id', '')})"
        )
        try:
            outcomes.append((label, _ingest_one(path, run, store=store, options=options)))
        except IngestError as error:
            outcomes.append((label, error))
        except Exception as error:  # noqa: BLE001 - one bad run must not stop the others
            message = f"could not be ingested: {type(error).__name__}: {error}"
            outcomes.append((label, IngestError(str(path), number, message)))
    return outcomes


def _ingest_one(
    path: Path, session: Recording | SessionLog, *, store: BlobStore, options: IngestOptions
) -> IngestResult:
    """ingest_session of one recording, or of our own log, read from *path*."""
    source_format = session.format if isinstance(session, Recording) else OUR_FORMAT
    result = ingest_session(
        session.header,
        session.records,
        source_path=str(path),
        store=store,
        source_format=source_format,
        options=options,
        earlier=session.earlier if isinstance(session, Recording) else None,
    )
    if isinstance(session, SessionLog) and session.torn_tail:
        result = replace(result, torn_tail=True)
    return result


def ingest_session(
    header: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    *,
    source_path: str,
    store: BlobStore,
    source_format: str = OUR_FORMAT,
    version: int | None = None,
    options: IngestOptions = DEFAULT_OPTIONS,
    earlier: Sequence[Mapping[str, Any]] | None = None,
    kept_blobs: Mapping[str, uuid.UUID] | None = None,
) -> IngestResult:
    """Upsert a session and add the records it does not have yet, atomically.

    *header* has `id` (a UUID), `created_at` (ISO 8601), `title`, `model`, `meta`.
    Each record has `type` (user, assistant, tool_result), `seq`, `at`, and the item's
    fields (importers may add `role`, `sidechain`, the turn's `input_tokens`,
    `output_tokens`, `context_tokens`, `cache_read_tokens`, `cache_write_tokens` and
    `cost_usd`, and `source_digest`, which keys the item instead of a digest of the
    record; the header may add `status`, and `cost_usd`, the whole run's cost, which wins
    over the sum of its items'). Outputs kept whole are promoted
    here, which also records how big they were (`received_bytes` in a record is ignored).

    *version* is the importer version that derived *records* (default: the current one
    for *source_format*). A session recorded by another version raises OutdatedSession
    and nothing is written, unless the options rebuild: then a session recorded by an
    older version is re-derived in place: items still derived keep their seq and are
    rewritten, a re-derived output equal to the blob its item had keeps that blob (no new
    blob), items no longer derived are deleted (their seqs stay unused), new items get
    seqs after the largest. A rebuild of a session that is new or up to date is a plain
    ingest.

    The options' owner becomes the owner of a session this creates, or of one that has
    none yet; a session owned by another user is refused.

    Files are written and read (promotion, blob facts) before the transaction, so the
    database is not held locked meanwhile; if anything fails, the blobs this call stored
    are discarded again, so a failed ingest leaves nothing behind. Their ids are journaled
    until the transaction commits, so that a killed ingest's are found and removed later
    (blobviewer.ingest.journal).

    A session deleted by `manage.py prune` raises SessionPruned and nothing is written;
    with the options' force its tombstone goes (with the transaction) and it is ingested
    again.

    *earlier*: the records come from a read that resumed where the last ingest of a
    grown recording ended (Recording.earlier): they are only what its new lines add, and
    *earlier* the recorded items those lines change. NotResumable is raised, and nothing
    written, when they do not go on from the session as recorded.

    *kept_blobs*: the blob a new item of that digest was promoted to before (the OTLP
    receiver re-derives the items after a span that came late): a new item's output that
    is still what that blob holds is summarised under it, and nothing is stored.

    Another ingest of the same session (another file of it, an upload, another process)
    may commit between the plan and this transaction: its rows then conflict with these,
    nothing of this try is kept, and the ingest is planned again from what that one wrote
    (up to three tries; one inside a caller's transaction, which a conflict breaks).
    """
    if version is None:
        version = importer_version(source_format)
    source = _Source(source_path, source_format, version, earlier, kept_blobs or {})
    tries = 1 if connection.in_atomic_block else _TRIES
    for attempt in range(1, tries + 1):
        try:
            return _ingest_once(
                header,
                records,
                source=source,
                store=store,
                options=options,
                last_try=attempt == tries,
            )
        except _Conflict:
            continue
    raise AssertionError("the last try raises what it meets")


# Tries of an ingest whose rows another ingest of the same session took meanwhile.
_TRIES = 3


class _Conflict(Exception):
    """Another transaction wrote rows of this session after the plan was made."""


# PostgreSQL's deadlock_detected and serialization_failure: two transactions of one
# session (or sharing blobs) waited for each other, and this one was chosen to give way.
_GIVE_WAY = frozenset({"40P01", "40001"})


def _conflicted(error: BaseException) -> bool:
    """Whether *error* is another ingest's doing, so that trying again can succeed: its
    rows took a key this one wanted, or the two transactions deadlocked."""
    if isinstance(error, IntegrityError):
        return True
    return isinstance(error, DatabaseError) and (
        getattr(error.__cause__, "sqlstate", None) in _GIVE_WAY
    )


@dataclass(frozen=True)
class _Source:
    """Where a session's records came from: the recording's path (or an upload's
    location), its format, and the importer version that derived them."""

    path: str
    format: str
    version: int
    earlier: Sequence[Mapping[str, Any]] | None = None  # see ingest_session
    kept_blobs: Mapping[str, uuid.UUID] = field(default_factory=dict)  # see ingest_session


def _ingest_once(
    header: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    *,
    source: _Source,
    store: BlobStore,
    options: IngestOptions,
    last_try: bool,
) -> IngestResult:
    """One try of ingest_session; raises _Conflict when another ingest's rows got in the
    way and a try is left."""
    session_id, plan = _plan(header, records, source, options)
    promotions = Promotions(store, options.policy, source.path)
    try:
        write = _prepare(header, session_id, plan, source, promotions, options)
        session, new_refs = write_session(write)
    except BaseException as error:
        promotions.discard()
        if _conflicted(error) and not last_try:
            raise _Conflict from None
        if isinstance(error, DatabaseError):
            message = f"the database refused it ({error}); nothing was recorded"
            raise IngestError(source.path, None, message) from None
        raise
    promotions.committed()
    # After the transaction, so blob files are not read with the database locked; what a
    # failure here leaves unindexed, the next ingest of the session indexes.
    changed = [item.as_model() for item in write.rederived]
    index_session(session.id, store=store, changed_items=changed)
    return IngestResult(
        session_id=session.id,
        path=source.path,
        new_items=len(write.new_items),
        total_items=session.item_count,
        new_blob_refs=new_refs,
        blobs=session.blob_count,
        missing_blobs=sum(1 for blob in write.blobs.rows.values() if blob.missing),
        stored_blobs=tuple(promotions.written),
        rebuilt=plan.rebuild,
        rederived_items=len(write.rederived),
        removed_items=len(plan.removed),
        reused_blobs=len(promotions.reused),
    )


def _plan(
    header: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    source: _Source,
    options: IngestOptions,
) -> tuple[uuid.UUID, IngestPlan]:
    """The session's id and what to do with *records*, after the checks that need no
    files written (see planning.plan_ingest)."""
    session_id = header_session_id(header, source.path)
    pruned, recorded = pruned_or_recorded(session_id)
    if pruned and not options.force:
        check_not_pruned(session_id, source.path)
    check_seqs(records, source.path)
    plan = plan_ingest(
        session_id,
        with_digests(records, source.format),
        source_format=source.format,
        source_path=source.path,
        version=source.version,
        recorded=recorded,
        options=options,
        earlier=None if source.earlier is None else with_digests(source.earlier, source.format),
    )
    return session_id, plan


def _prepare(
    header: Mapping[str, Any],
    session_id: uuid.UUID,
    plan: IngestPlan,
    source: _Source,
    promotions: Promotions,
    options: IngestOptions,
) -> SessionWrite:
    """Everything the transaction writes, made before it: outputs promoted and stored,
    item rows, the facts of the blobs they reference."""
    # Secrets go before anything is stored (core.redaction): the items, and the blobs
    # their outputs are promoted to.
    new_records = [
        promotions.promoted(redact_item(record), reuse=source.kept_blobs.get(record["digest"]))
        for record in plan.new
    ]
    rederived_records = [
        promotions.promoted(redact_item(record), reuse=plan.old_blobs.get(record["seq"]))
        for record in plan.rederived
    ]
    new_items = [item_row(session_id, source.path, record) for record in new_records]
    rederived = [
        item_row(session_id, source.path, record, pk=plan.item_pks[record["seq"]])
        for record in rederived_records
    ]
    # Each item's blob references, found once (making text storable touches none).
    item_refs = [(item, blob_refs_of(item)) for item in [*new_items, *rederived]]
    referenced = {blob_id for _, blob_ids in item_refs for blob_id in blob_ids}
    blobs = catalog_blobs(referenced, store=promotions.store, stored=promotions.stored)
    size_promoted(new_items, new_records, blobs)
    size_promoted(rederived, rederived_records, blobs)
    status = header.get("status")
    return SessionWrite(
        session_id=session_id,
        source_path=source.path,
        fields=session_fields(
            header,
            session_id,
            plan,
            source_path=source.path,
            source_format=source.format,
            version=source.version,
        ),
        plan=plan,
        new_items=new_items,
        rederived=rederived,
        item_refs=item_refs,
        blobs=blobs,
        recorded_start=storable_time(header.get("created_at")),
        status=storable(status if isinstance(status, str) else ""),
        options=options,
        recorded_cost=stored_cost(header.get("cost_usd")),
    )
