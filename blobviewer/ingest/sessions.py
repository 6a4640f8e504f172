"""Ingest recorded sessions into the database: sessions, items, blob links, blob facts.

`ingest_session(header, records, ...)` is the one entry point that writes; it takes a
session header and item records in the session log's shape (SPEC 2.10), so an importer for
another agent's format only has to produce those. `ingest_file(path)` recognises a file's
format by its content: our own session logs, or another agent's recording (see
blobviewer.ingest.importers). Both are idempotent: ingesting a log again, or after it grew, adds
only the new items.

Each item has a digest of where it came from: for another agent's recording, of its
source record (the importer's `source_digest`: a JSON Lines line, or one message or step
of a whole-document recording), never of what the importer made of it; for our own log,
of the line's record. So an importer that changes what it derives still knows which items
it recorded. Each session records the importer version that derived it
(`Session.importer_version`); a plain ingest of a session recorded by another version
appends nothing and says to run `manage.py ingest --rebuild`, which re-derives the
session's items from its recording in place (see ingest_session's *rebuild*).

Our own logs number their items themselves (their seqs are the items' seqs); another
agent's recording is numbered by ingest: items already recorded keep their seq (matched
by digest), new ones get the seqs after the largest, so `/sessions/<id>/items/<seq>/`
links keep pointing at the same item.

Tool outputs that a recording kept whole go through core's promotion on the way in, as a
live Worker would have done: over the threshold, the output is stored as a blob and the
item keeps its summary. Only new items are promoted, so re-ingesting stores nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import DEFAULT_DB_ALIAS, DatabaseError, IntegrityError, connection, transaction
from django.db.models import Count, F, Model, Q, Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from blobviewer.bulk_insert import insert_objects, insert_rows
from blobviewer.catalog.blobs import BlobFacts, index_blobs, stored_blob_facts
from blobviewer.catalog.provenance import link_made_by, made_blob, made_by_titles
from blobviewer.catalog.retention import session_pruned_message
from blobviewer.ingest.importers import (
    OUR_FORMAT,
    Recording,
    RecordingError,
    UnknownFormat,
    folder_layout,
    holds_runs,
    importer_version,
    load_folder,
    load_runs,
    load_sniffed,
    read_bytes,
    sniff,
)
from blobviewer.models import Blob, BlobRef, Item, PrunedSession, Session
from blobviewer.search.indexing import index_session
from blobviewer.timeline.facts import (
    FACT_FIELDS,
    fill_step_durations,
    set_new_session_facts,
    update_session_facts,
)
from core.agent.policy import DEFAULT_POLICY, Policy
from core.agent.session_log import MAX_SEQ, SessionLog, SessionLogError, parse_session_log
from core.content import Content, Stored, Text, encode_text, utf8_size
from core.json_values import dumps_for_storage
from core.promotion import admit_sync, promote
from core.store import FsBlobStore
from core.store.blob_id import BLOB_REF, blob_created_at, find_blob_refs
from core.store.errors import BlobStoreError
from core.summary import summarize

_BATCH = 500
_TOKEN_FIELDS = ("input_tokens", "output_tokens", "context_tokens")
_MAX_BIGINT = 2**63 - 1

# Databases cannot hold every str Python can: PostgreSQL refuses NUL in text and JSON, and
# neither database encodes lone surrogates. The log file keeps the original; the index
# keeps a visible stand-in.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_HEX64 = re.compile("[0-9a-f]{64}")


class IngestError(Exception):
    """A session could not be ingested; nothing of it was written. Reads `path:line: msg`.

    *message* never names a path on the server, so the upload API can pass it on;
    *detail* is for the operator at the command line (e.g. the file a session was
    recorded from) and is only part of str(error).
    """

    def __init__(self, path: str, line: int | None, message: str, *, detail: str = "") -> None:
        self.path = path
        self.line = line
        self.message = message
        self.detail = detail
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}" + (f" ({detail})" if detail else ""))


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
    rebuilt: bool = False  # the session's items were re-derived (ingest_session's rebuild)
    rederived_items: int = 0  # rebuild: items re-derived in place, under their own seq
    removed_items: int = 0  # rebuild: items the importer no longer derives (a gap in seqs)
    reused_blobs: int = 0  # rebuild: re-derived outputs equal to their old blob, kept as is


class NotARecording(IngestError):
    """The file is in no format blobviewer reads (a folder scan skips such files)."""


class OutdatedSession(IngestError):
    """The session was recorded by another version of its importer: a plain ingest appends
    nothing to it (its items would not match), and `manage.py ingest --rebuild` re-derives
    it. The message is one line and names no server path (the upload API answers 409)."""

    def __init__(
        self, path: str, session_id: uuid.UUID, source_format: str, recorded: int, current: int
    ) -> None:
        if recorded < current:
            message = (
                f"session {session_id} was recorded by an older {source_format} importer "
                f"(version {recorded}; this is version {current}): nothing appended; "
                "run manage.py ingest --rebuild to re-derive it"
            )
        else:
            message = (
                f"session {session_id} was recorded by a newer {source_format} importer "
                f"(version {recorded}; this is version {current}): nothing appended"
            )
        super().__init__(path, None, message)
        self.session_id = session_id
        self.recorded_version = recorded
        self.current_version = current


class SessionPruned(IngestError):
    """The session was deleted by `manage.py prune`; it is ingested again only when forced.
    Reads `path: skipped: session <id> was pruned on DATE; use --force to ingest it again`."""

    def __init__(self, path: str, tombstone: PrunedSession) -> None:
        super().__init__(path, None, session_pruned_message(tombstone.id, tombstone.pruned_at))
        self.tombstone = tombstone


def ingest_file(
    path: Path,
    *,
    store: FsBlobStore,
    force: bool = False,
    owner: AbstractBaseUser | None = None,
    rebuild: bool = False,
) -> IngestResult:
    """Ingest a session log or another agent's recording, recognised by its content (a
    conversation folder, see blobviewer.ingest.importers.folder_layout, is one recording).

    A torn last line of a session log is skipped, to be read once it is complete. A pruned
    session raises SessionPruned unless *force* (see ingest_session). *owner* and
    *rebuild*: as for ingest_session. A file of several runs, each a session of its own
    (an OpenHands evaluation output), raises IngestError: ingest_recordings takes those.
    """
    opened = open_recording(path)
    if opened.runs is not None:
        message = (
            f"an OpenHands evaluation output of {len(opened.runs)} runs, each a session of "
            "its own: ingest it with manage.py ingest"
        )
        raise IngestError(str(path), None, message)
    return _ingest_opened(path, opened, store=store, force=force, owner=owner, rebuild=rebuild)


def ingest_recordings(
    path: Path,
    *,
    store: FsBlobStore,
    force: bool = False,
    owner: AbstractBaseUser | None = None,
    rebuild: bool = False,
    opened: Opened | None = None,
) -> list[tuple[str, IngestResult | IngestError]]:
    """Ingest every session *path* holds: `[("", result)]` for a file or folder that is
    one recording (as ingest_file, whose errors it raises), or, for an OpenHands
    evaluation output, one `(label, outcome)` for each run, in line order: *label* names
    the run (`line 3 (django__django-1)`), *outcome* is its IngestResult, or the
    IngestError that skipped that run only (a damaged line reads `path:line: message`).
    *opened* is what open_recording read of *path*, if the caller read it already (to
    keep a copy of what was ingested)."""
    if opened is None:
        opened = open_recording(path)
    if opened.runs is None:
        result = _ingest_opened(
            path, opened, store=store, force=force, owner=owner, rebuild=rebuild
        )
        return [("", result)]
    outcomes: list[tuple[str, IngestResult | IngestError]] = []
    for number, run in opened.runs:
        if isinstance(run, RecordingError):
            outcomes.append((f"line {number}", IngestError(run.path, run.line, run.message)))
            continue
        label = f"line {number} ({run.header['meta'].get('instance_id', '')})"
        try:
            result = ingest_session(
                run.header,
                run.records,
                source_path=str(path),
                store=store,
                source_format=run.format,
                force=force,
                owner=owner,
                rebuild=rebuild,
            )
        except IngestError as error:
            outcomes.append((label, error))
        except Exception as error:  # noqa: BLE001 - one bad run must not stop the others
            message = f"could not be ingested: {type(error).__name__}: {error}"
            outcomes.append((label, IngestError(str(path), number, message)))
        else:
            outcomes.append((label, result))
    return outcomes


@dataclass(frozen=True)
class Opened:
    """A recording read and recognised: our own log, parsed; another agent's recording;
    or the runs of a file that holds several."""

    kind: str
    log: SessionLog | None = None
    recording: Recording | None = None
    runs: list[tuple[int, Recording | RecordingError]] | None = None


def open_recording(path: Path) -> Opened:
    """Read, recognise and parse *path*; raises NotARecording or IngestError
    (`path:line: msg`, naming the event file of a conversation folder that is damaged)."""
    try:
        if path.is_dir() and folder_layout(path) is not None:
            recording = load_folder(path)
            return Opened(recording.format, recording=recording)
        data = read_bytes(path)
        kind, document = sniff(path, data)
        if holds_runs(kind, document):
            return Opened(kind, runs=load_runs(path, data))
        if kind != OUR_FORMAT:
            return Opened(kind, recording=load_sniffed(path, data, kind, document))
        return Opened(kind, log=parse_session_log(data, path))
    except UnknownFormat as error:
        raise NotARecording(str(path), error.line, error.message) from None
    except RecordingError as error:
        raise IngestError(error.path, error.line, error.message) from None
    except SessionLogError as error:
        raise IngestError(str(path), error.line or None, error.message) from None


def _ingest_opened(
    path: Path,
    opened: Opened,
    *,
    store: FsBlobStore,
    force: bool,
    owner: AbstractBaseUser | None,
    rebuild: bool,
) -> IngestResult:
    recording = opened.recording
    if recording is not None:
        return ingest_session(
            recording.header,
            recording.records,
            source_path=str(path),
            store=store,
            source_format=recording.format,
            force=force,
            owner=owner,
            rebuild=rebuild,
        )
    log = opened.log
    assert log is not None  # open_recording parsed it
    result = ingest_session(
        log.header,
        log.records,
        source_path=str(path),
        store=store,
        force=force,
        owner=owner,
        rebuild=rebuild,
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
    owner: AbstractBaseUser | None = None,
    rebuild: bool = False,
    version: int | None = None,
) -> IngestResult:
    """Upsert a session and add the records it does not have yet, atomically.

    *header* has `id` (a UUID), `created_at` (ISO 8601), `title`, `model`, `meta`.
    Each record has `type` (user, assistant, tool_result), `seq`, `at`, and the item's
    fields (importers may add `role`, `sidechain`, the turn's `input_tokens`,
    `output_tokens`, `context_tokens`, and `source_digest`, which keys the item instead of
    a digest of the record; the header may add `status`). Outputs kept whole are promoted
    here, which also records how big they were (`received_bytes` in a record is ignored).

    *version* is the importer version that derived *records* (default: the current one
    for *source_format*). A session recorded by another version raises OutdatedSession and
    nothing is written, unless *rebuild*: then a session recorded by an older version is
    re-derived in place: items still derived keep their seq and are rewritten, a re-derived
    output equal to the blob its item had keeps that blob (no new blob), items no longer
    derived are deleted (their seqs stay unused), new items get seqs after the largest.
    A *rebuild* of a session that is new or up to date is a plain ingest.

    *owner* becomes the owner of a session this creates, or of one that has none yet; a
    session owned by another user is refused. None leaves ownership as it is.

    Files are written and read (promotion, blob facts) before the transaction, so the
    database is not held locked meanwhile; if anything fails, the blobs this call stored
    are discarded again, so a failed ingest leaves nothing behind.

    A session deleted by `manage.py prune` raises SessionPruned and nothing is written;
    with *force* its tombstone goes (with the transaction) and it is ingested again.

    Another ingest of the same session (another file of it, an upload, another process)
    may commit between the plan and this transaction: its rows then conflict with these,
    nothing of this try is kept, and the ingest is planned again from what that one wrote
    (up to three tries; one inside a caller's transaction, which a conflict breaks).
    """
    tries = 1 if connection.in_atomic_block else _TRIES
    for attempt in range(1, tries + 1):
        try:
            return _ingest_once(
                header,
                records,
                source_path=source_path,
                store=store,
                source_format=source_format,
                policy=policy,
                force=force,
                owner=owner,
                rebuild=rebuild,
                version=version,
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


def _ingest_once(
    header: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    *,
    source_path: str,
    store: FsBlobStore,
    source_format: str,
    policy: Policy,
    force: bool,
    owner: AbstractBaseUser | None,
    rebuild: bool,
    version: int | None,
    last_try: bool,
) -> IngestResult:
    session_id = _session_id(header, source_path)
    pruned, recorded = _known(session_id)
    if pruned and not force:
        _check_not_pruned(session_id, source_path)
    _check_unique_seqs(records, source_path)
    version = importer_version(source_format) if version is None else version
    plan = _check_same_session(
        session_id,
        _with_digests(records, source_format),
        source_format,
        source_path,
        owner,
        version=version,
        rebuild=rebuild,
        recorded=recorded,
    )
    written: list[uuid.UUID] = []
    stored: dict[uuid.UUID, Blob] = {}  # the rows of blobs written, made as they were
    reused: list[uuid.UUID] = []
    try:
        promoted = partial(
            _promoted,
            store=store,
            policy=policy,
            source_path=source_path,
            written=written,
            stored=stored,
        )
        new_records = [promoted(record) for record in plan.new]
        rederived_records = [
            promoted(record, reuse=plan.old_blobs.get(record["seq"]), reused=reused)
            for record in plan.rederived
        ]
        new_items = [_item(session_id, source_path, record) for record in new_records]
        rederived = [
            _item(session_id, source_path, record, pk=plan.item_pks[record["seq"]])
            for record in rederived_records
        ]
        # Each item's blob references, found once (making text storable touches none).
        item_refs = [(item, _refs(item)) for item in [*new_items, *rederived]]
        referenced = {blob_id for _, blob_ids in item_refs for blob_id in blob_ids}
        blobs = index_blobs(referenced, store=store, stored=stored)
        _size_promoted(new_items, new_records, blobs)
        _size_promoted(rederived, rederived_records, blobs)
        fields = {
            "title": _storable(str(header.get("title") or ""))[:500],
            "model": _storable(str(header.get("model") or ""))[:200],
            "meta": _storable_json(header.get("meta") or {}),
            "created_at": _created_at(header, session_id, kept=plan.kept_created_at),
            "source_path": source_path[:1000],
            "source_format": source_format,
            "importer_version": version,
        }
        recorded_start = _datetime(header.get("created_at"))
        status = _storable(_text(header.get("status")))
        with transaction.atomic():
            if plan.new_session:
                # Inserted without save()'s signals: search indexes the title after the
                # transaction, with the items. Another ingest that inserts this session
                # meanwhile makes this try fail, as its items would (their seqs are taken),
                # and the next one plans again (see ingest_session).
                # Every item is known: the facts and totals go in with the row.
                session = Session(id=session_id, owner=owner, **fields)
                set_new_session_facts(
                    session, new_items, recorded_start=recorded_start, status=status
                )
                _set_totals(session, new_items, referenced)
                session.ingested_at = session.updated_at = timezone.now()
                insert_objects(Session, [session])
                session._state.adding, session._state.db = False, DEFAULT_DB_ALIAS
            else:
                session, _ = Session.objects.update_or_create(id=session_id, defaults=fields)
            if owner is not None and session.owner_id != owner.pk:
                # Checked again under the row lock update_or_create took: another ingest
                # may have given the session an owner since _check_same_session looked.
                if session.owner_id is not None:
                    raise _owned_by_another(session_id, source_path, session.owner_id)
                session.owner = owner
                session.save(update_fields=["owner"])
            # Again under the session row's lock: a prune that committed meanwhile wins.
            if force:
                PrunedSession.objects.filter(id=session_id).delete()
            else:
                _check_not_pruned(session_id, source_path)
            _rederive(plan, rederived)
            # A first ingest knows every item of the session: its facts and totals come
            # from them, not from reading the rows back (checked under the lock: the
            # plan was made before it).
            # A session this transaction inserted has no items but these.
            first = plan.new_session or (
                plan.first and not Item.objects.filter(session_id=session_id).exists()
            )
            if first and not plan.new_session:
                set_new_session_facts(
                    session, new_items, recorded_start=recorded_start, status=status
                )
            elif not first:
                fill_step_durations(session, [*new_items, *rederived])
            _insert_items(new_items, rederived)
            written_items = [*new_items, *rederived]
            # Which step made each blob: a new blob's row is inserted with its maker;
            # older ones are linked after (a rebuild's re-created items, again).
            new_blobs = {row.id for row in blobs.new}
            for blob_id, (maker, title) in made_by_titles(
                session, written_items, new_blobs
            ).items():
                blobs.rows[blob_id].made_by_id = maker.pk
                blobs.rows[blob_id].made_by_title = title
            blobs.save()
            _refresh_tokens(plan.grown_tokens)
            refs = [(item.id, blob_id) for item, blob_ids in item_refs for blob_id in blob_ids]
            insert_rows(
                BlobRef,
                ("item_id", "session_id", "blob_id"),
                [(item_id, session_id, blob_id) for item_id, blob_id in refs],
            )
            made = {made_blob(item.type, item.tool, item.output) for item in written_items}
            if not made - {None} <= new_blobs:  # blobs that already had rows: linked now
                link_made_by(session, written_items)
            if not first:
                _size_found_late(session, blobs)
                _update_totals(session)
                update_session_facts(session, recorded_start=recorded_start, status=status)
            elif not plan.new_session:  # a new session's were inserted with its row
                _set_totals(session, new_items, {blob_id for _, blob_id in refs})
                session.save(update_fields=[*_TOTAL_FIELDS, *FACT_FIELDS, "updated_at"])
    except BaseException as error:
        for blob_id in written:
            store.discard_sync(blob_id)
        Blob.objects.filter(id__in=written).delete()
        if _conflicted(error) and not last_try:
            raise _Conflict from None
        if isinstance(error, DatabaseError):
            message = f"the database refused it ({error}); nothing was recorded"
            raise IngestError(source_path, None, message) from None
        raise
    # After the transaction, so blob files are not read with the database locked; what a
    # failure here leaves unindexed, the next ingest of the session indexes.
    index_session(session.id, store=store, changed_items=[item.as_model() for item in rederived])
    return IngestResult(
        session_id=session.id,
        path=source_path,
        new_items=len(new_items),
        total_items=session.item_count,
        new_blob_refs=len(refs),
        blobs=session.blob_count,
        missing_blobs=sum(1 for blob in blobs.rows.values() if blob.missing),
        stored_blobs=tuple(written),
        rebuilt=plan.rebuild,
        rederived_items=len(rederived),
        removed_items=len(plan.removed),
        reused_blobs=len(reused),
    )


RECORDING_SUFFIXES = (".jsonl", ".json", ".traj")


def recording_paths(paths: Iterable[Path]) -> list[tuple[Path, bool]]:
    """(path, named) pairs: files as given (named), and the files of folders, searched
    recursively for recording-like names, in name order. Hidden entries and blob stores
    (folders named `blobs`, whose `.json` files are blobs, not recordings) are passed over.
    A conversation folder (OpenHands: see blobviewer.ingest.importers.folder_layout) is one
    recording, given or found, and the files inside it are not searched.
    """
    found: list[tuple[Path, bool]] = []
    for path in paths:
        if not path.is_dir() or folder_layout(path) is not None:
            found.append((path, True))
            continue
        candidates = sorted(path.rglob("*"))
        # Recognised by what is in them (an events/ folder and its first event or state).
        folders = {c.parent for c in candidates if c.name == "events" and folder_layout(c.parent)}
        for candidate in candidates:
            if folders and not folders.isdisjoint(candidate.parents):
                continue  # inside a conversation folder: part of that recording
            parts = candidate.relative_to(path).parts
            if (
                (
                    candidate in folders
                    or (candidate.suffix in RECORDING_SUFFIXES and candidate.is_file())
                )
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
    stored: dict[uuid.UUID, Blob],
    reuse: uuid.UUID | None = None,
    reused: list[uuid.UUID] | None = None,
) -> Mapping[str, Any]:
    """*record*, its tool output promoted when the recording kept a big one whole.
    A blob written is added to *written*, and its row (made from the content in hand,
    see stored_blob_facts) to *stored* unless it has to be read from the store.

    An output that already starts with `[blob:<id>]` is a summary our Worker wrote, or an
    inspect result (never promoted), and passes as it is. When the blob *reuse* (the one
    the item had before a rebuild) holds exactly what promotion would store, the output is
    summarised under that id and nothing is stored: share links to it keep working.
    """
    output = _promotable(record)
    if output is None:
        return record
    promoted = promote(output, policy)
    if not isinstance(promoted, Stored):
        return record
    if reuse is not None and _holds(store, reuse, promoted.content):
        if reused is not None:
            reused.append(reuse)
        summary = summarize(reuse, promoted.content, policy)
        return {**record, "output": summary, "received_bytes": utf8_size(output)}
    try:
        done = _store_promoted(promoted, output, store, policy)
    except BlobStoreError as error:
        # The store's own message may name its folder: that is for the operator only.
        seq = record.get("seq")
        raise IngestError(
            source_path,
            None,
            f"seq {seq}: the blob store cannot store its output",
            detail=str(error),
        ) from None
    written.append(done.blob_id)
    if done.row is not None:
        stored[done.blob_id] = done.row
    return {**record, "output": done.text, "received_bytes": done.received_bytes}


def _promotable(record: Mapping[str, Any]) -> str | None:
    """The output of a tool result that promotion may store (not a summary already)."""
    output = record.get("output")
    if record.get("type") != "tool_result" or not isinstance(output, str):
        return None
    return None if BLOB_REF.match(output) else output


@dataclass(frozen=True, slots=True)
class Promotion:
    """A tool output stored as a blob: the summary its item holds instead, the blob, its
    row when made from the content in hand (see stored_blob_facts), the output's size."""

    text: str
    blob_id: uuid.UUID
    row: Blob | None
    received_bytes: int


def _store_promoted(promoted: Stored, output: str, store: FsBlobStore, policy: Policy) -> Promotion:
    """Store *promoted* (*output* as promote made it); raises BlobStoreError."""
    admitted = admit_sync(promoted, store, policy)
    assert admitted.blob_id is not None  # a Stored output is always stored
    row = stored_blob_facts(admitted.blob_id, promoted.content, store=store)
    return Promotion(admitted.text, admitted.blob_id, row, utf8_size(output))


def _holds(store: FsBlobStore, blob_id: uuid.UUID, content: Content) -> bool:
    """Whether the store's blob *blob_id* is byte for byte what storing *content* writes."""
    try:
        with store.open_sync(blob_id) as blob:
            if isinstance(content, Text):
                data, kind = encode_text(content.text), "text"
            else:
                data, kind = dumps_for_storage(content.value), "json"
            return blob.kind == kind and blob.size == len(data) and blob.read(0, len(data)) == data
    except (BlobStoreError, OSError, TypeError, ValueError, RecursionError):
        return False  # unreadable or unencodable: store the output anew


# --- helpers -------------------------------------------------------------------------------


def _session_id(header: Mapping[str, Any], source_path: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(header.get("id", "")))
    except ValueError:
        raise IngestError(source_path, 1, "session id must be a UUID") from None


def _check_not_pruned(session_id: uuid.UUID, source_path: str) -> None:
    if not _has_row(PrunedSession, session_id):
        return
    tombstone = PrunedSession.objects.filter(id=session_id).first()
    if tombstone is not None:
        raise SessionPruned(source_path, tombstone)


def _known(session_id: uuid.UUID) -> tuple[bool, bool]:
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
    owner: AbstractBaseUser | None = None,
    *,
    version: int,
    rebuild: bool = False,
    recorded: bool = True,
) -> _Plan:
    """What to do with *records* (with their digests, see _with_digests): after checking
    that they continue that session rather than being another recording that claims its
    id, that the session is no other user's than *owner*'s, and that its importer version
    is *version* (else OutdatedSession, unless a *rebuild* re-derives it). The messages
    name no server path (the upload API passes them on): where the session was recorded
    from is in the detail. *recorded* False: a query just found no session row with
    the id (no need to look again)."""
    if not recorded:
        return _Plan(new=list(records), first=True, new_session=True)
    existing = (
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
    if existing is None:
        return _Plan(new=list(records), first=True, new_session=True)
    recorded_from = f"recorded from {existing['source_path']}" if existing["source_path"] else ""
    if owner is not None and existing["owner_id"] not in (None, owner.pk):
        raise _owned_by_another(session_id, source_path, existing["owner_id"])
    if existing["source_format"] != source_format:
        raise IngestError(
            source_path,
            None,
            f"session {session_id} is already recorded from a {existing['source_format']} "
            f"recording; this is a {source_format} one",
            detail=recorded_from,
        )
    rows = [
        _Row(*row)
        for row in Item.objects.filter(session_id=session_id)
        .order_by("seq")
        .values_list("pk", "seq", "digest", "type", *_TOKEN_FIELDS)
    ]
    if not rows:  # a session not filled in yet (an upload's claim): anything goes in
        return _Plan(new=list(records), kept_created_at=existing["created_at"], first=True)

    def differs(seq: int) -> IngestError:
        return IngestError(
            source_path,
            None,
            f"seq {seq} differs from session {session_id} as already recorded: "
            "is this another run with the same id?",
            detail=recorded_from,
        )

    recorded_version = existing["importer_version"]
    authored = source_format == OUR_FORMAT  # our logs number their items themselves
    if recorded_version < version and rebuild:
        # A timeless recording sorted by the file's mtime before; now by when it ran, if
        # the id says (our UUID v7 session ids), else by when it was first ingested.
        kept = blob_created_at(session_id) or existing["ingested_at"]
        plan = _rebuild_plan(
            records, rows, authored=authored, legacy=recorded_version == 0, differs=differs
        )
        return _with_old_blobs(replace(plan, kept_created_at=kept))
    if recorded_version != version:
        raise OutdatedSession(source_path, session_id, source_format, recorded_version, version)
    if authored:
        by_seq = {row.seq: row for row in rows}
        for record in records:
            row = by_seq.get(record["seq"])
            if row is not None and row.digest and row.digest != record["digest"]:
                raise differs(record["seq"])
        return _Plan(
            new=[record for record in records if record["seq"] not in by_seq],
            grown_tokens=_grown_tokens(records, {row.seq: row for row in rows}, "seq"),
            kept_created_at=existing["created_at"],
        )
    # Another agent's recording may only have grown: the items already recorded come
    # first, in their order, and every one of them is still there when anything is new.
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
    return _Plan(
        new=_numbered(new, after=max(row.seq for row in rows)),
        grown_tokens=_grown_tokens(records[:known], by_digest, "digest"),
        kept_created_at=existing["created_at"],
    )


@dataclass(frozen=True)
class _Row:
    """An item already recorded, as _check_same_session compares it."""

    pk: int
    seq: int
    digest: str
    type: str
    input_tokens: int | None
    output_tokens: int | None
    context_tokens: int | None


@dataclass(frozen=True)
class _Plan:
    """What an ingest does to a session's items. Every record carries its final seq."""

    new: list[dict[str, Any]] = field(default_factory=list)  # items to add
    # A rebuild: records that rewrite the item of their seq, that item's pk, and the blob
    # its output was promoted to (kept when the new output is the same).
    rederived: list[dict[str, Any]] = field(default_factory=list)
    item_pks: dict[int, int] = field(default_factory=dict)
    old_blobs: dict[int, uuid.UUID] = field(default_factory=dict)
    removed: list[int] = field(default_factory=list)  # pks of items no longer derived
    # Items already recorded whose tokens the recording now says more about (Claude Code
    # adds an API message's final usage with its last line): pk -> token fields.
    grown_tokens: dict[int, dict[str, int | None]] = field(default_factory=dict)
    kept_created_at: datetime | None = None  # when the header has no time
    rebuild: bool = False
    first: bool = False  # the session has no items yet: every item is new
    new_session: bool = False  # nor a row


def _rebuild_plan(
    records: list[dict[str, Any]],
    rows: list[_Row],
    *,
    authored: bool,
    legacy: bool,
    differs: Callable[[int], IngestError],
) -> _Plan:
    """Match the re-derived *records* to the recorded *rows*: our own logs by seq (their
    lines never go away, so nothing is removed); sessions recorded before digests were
    over source records (importer version 0, *legacy*) by seq and type, which is where the
    old importers put them; any other by digest."""
    by_seq = {row.seq: row for row in rows}
    matched: dict[int, _Row] = {}  # index in records -> the row it re-derives
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
    return _Plan(
        new=new,
        rederived=rederived,
        item_pks={row.seq: row.pk for row in matched.values()},
        removed=removed,
        rebuild=True,
    )


def _with_old_blobs(plan: _Plan) -> _Plan:
    """*plan* with the blob each re-derived tool result's old item was promoted to."""
    pks = list(plan.item_pks.values())
    old = Item.objects.filter(pk__in=pks, type=Item.Type.TOOL_RESULT).only(
        "pk", "seq", "type", "tool", "output"
    )
    blobs = {item.seq: blob for item in old if (blob := _promoted_blob(item)) is not None}
    return replace(plan, old_blobs=blobs)


def _numbered(records: list[dict[str, Any]], *, after: int) -> list[dict[str, Any]]:
    """*records* numbered after the largest seq recorded (seqs are never reused)."""
    return [{**record, "seq": after + n} for n, record in enumerate(records, start=1)]


def _grown_tokens(
    records: Sequence[Mapping[str, Any]], recorded: Mapping[Any, _Row], key: str
) -> dict[int, dict[str, int | None]]:
    grown = {}
    for record in records:
        row = recorded.get(record[key])
        if row is None or not any(name in record for name in _TOKEN_FIELDS):
            continue
        tokens = {name: _tokens(record.get(name)) for name in _TOKEN_FIELDS}
        if any(getattr(row, name) != value for name, value in tokens.items()):
            grown[row.pk] = tokens
    return grown


def _refresh_tokens(grown: Mapping[int, Mapping[str, int | None]]) -> None:
    Item.objects.bulk_update(
        [Item(pk=pk, **tokens) for pk, tokens in grown.items()],
        list(_TOKEN_FIELDS),
        batch_size=_BATCH,
    )


def _rederive(plan: _Plan, rederived: list[_NewItem]) -> None:
    """A rebuild's deletes: items no longer derived go, and so do the rows of re-derived
    items (with their blob links, which the caller makes anew); the caller inserts the
    re-derived items again under their old pk and seq: one delete and one insert instead
    of an update per row (Django's bulk_update writes a CASE per field and row, far too
    slow for a session of thousands of items)."""
    gone = [*plan.removed, *(item.id for item in rederived)]
    for start in range(0, len(gone), _BATCH):
        Item.objects.filter(pk__in=gone[start : start + _BATCH]).delete()


def _insert_items(new_items: list[_NewItem], rederived: list[_NewItem]) -> None:
    """Insert the items (a statement per few hundred rows); new ones get their pk."""
    ids = insert_objects(Item, new_items, exclude=("id",), returning="id")
    for item, pk in zip(new_items, ids, strict=True):
        item.id = pk
    insert_objects(Item, rederived)


def _with_digests(records: Sequence[Mapping[str, Any]], source_format: str) -> list[dict[str, Any]]:
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


def _owned_by_another(session_id: uuid.UUID, source_path: str, owner_id: Any) -> IngestError:
    owner = get_user_model().objects.filter(pk=owner_id).first()
    return IngestError(
        source_path,
        None,
        f"session {session_id} belongs to another user; manage.py sessions chown changes it",
        detail=f"its owner is {owner}" if owner else "",
    )


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


def _created_at(
    header: Mapping[str, Any], session_id: uuid.UUID, *, kept: datetime | None = None
) -> datetime:
    """The header's time; else *kept* (an existing session keeps its time), else the
    session id's (UUID v7), else now: a timeless recording sorts by when it was ingested."""
    parsed = _datetime(header.get("created_at"))
    return parsed or kept or blob_created_at(session_id) or timezone.now()


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


@dataclass(slots=True)
class _NewItem:
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
    duration: timedelta | None = None
    id: int | None = None  # the row's pk, once inserted (a rebuild keeps the old one)

    @property
    def pk(self) -> int | None:
        return self.id

    def as_model(self) -> Item:
        """The Item this row is (for code that wants a model instance)."""
        return Item(**{name: getattr(self, name) for name in self.__slots__})


def _item(
    session_id: uuid.UUID, source_path: str, record: Mapping[str, Any], *, pk: int | None = None
) -> _NewItem:
    get = record.get
    kind = get("type")
    if kind not in _ITEM_TYPES:
        raise IngestError(source_path, None, f"seq {get('seq')}: bad type {kind!r}")
    output = _text(get("output"))
    output_bytes = utf8_size(output) if kind == Item.Type.TOOL_RESULT else 0
    received = get("received_bytes")
    if not isinstance(received, int) or isinstance(received, bool) or received < 0:
        received = output_bytes
    return _NewItem(
        session_id,
        record["seq"],
        kind,
        _datetime(get("at")),
        _storable_text(get("text")),
        _storable_json(_tool_calls(get("tool_calls"))),
        _storable_text(get("call_id"))[:200],
        _storable_text(get("tool"))[:200],
        _storable(output),
        get("is_error") is True,
        _storable_text(get("role"))[:50],
        _text(get("digest")),
        get("sidechain") is True,
        output_bytes,
        received,
        _tokens(get("input_tokens")),
        _tokens(get("output_tokens")),
        _tokens(get("context_tokens")),
        _storable_text(get("note")),
        id=pk,
    )


def _storable_text(value: Any) -> str:
    """_storable(_text(value)), the common case in one call."""
    if not isinstance(value, str):
        return ""
    return _storable(value)


_ITEM_TYPES = frozenset(Item.Type.values)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _tokens(value: Any) -> int | None:
    """A token count a database column holds, else None (not recorded)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_BIGINT:
        return None
    return value


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
    if text.isascii():  # much faster than the regex over a long text
        return text.replace("\x00", "\u2400") if "\x00" in text else text
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: "\u2400" if m.group() == "\x00" else "\ufffd", text)


def _storable_json(value: Any) -> Any:
    """*value* with _storable strings (and keys). Most values have nothing to replace:
    orjson, which refuses a lone surrogate, writes them without a NUL (escaped `\\u0000`)
    many times faster than this function walks them, and they come back as they are."""
    if isinstance(value, list | dict):
        try:
            if b"\\u0000" not in orjson.dumps(value):
                return value
        except TypeError:  # a lone surrogate, a key that is no string, a huge int
            pass
    return _storable_walk(value)


def _storable_walk(value: Any) -> Any:
    if isinstance(value, str):
        return _storable(value)
    if isinstance(value, list):
        return [_storable_walk(v) for v in value]
    if isinstance(value, dict):
        return {_storable(str(k)): _storable_walk(v) for k, v in value.items()}
    return value


def _refs(item: Item | _NewItem) -> list[uuid.UUID]:
    refs = find_blob_refs(item.text)
    for blob_id in find_blob_refs(item.output):
        if blob_id not in refs:
            refs.append(blob_id)
    return refs


def _promoted_blob(item: Item | _NewItem) -> uuid.UUID | None:
    """The blob a promoted tool output's summary names; None for inline outputs.

    An inspect result also starts with `[blob:<id>]`, but it is what the model read, never
    promoted, so it is its own size.
    """
    if item.type != Item.Type.TOOL_RESULT or item.tool == "inspect":
        return None
    match = BLOB_REF.match(item.output)
    return uuid.UUID(match.group(1)) if match else None


def _size_promoted(
    items: list[_NewItem], records: list[Mapping[str, Any]], facts: BlobFacts
) -> None:
    """Received bytes of outputs promoted before ingest (our own logs: the output is the
    summary): the blob's size, when the store has the blob. Outputs ingest promoted
    itself carry theirs in the record."""
    for item, record in zip(items, records, strict=True):
        if "received_bytes" in record:
            continue
        blob_id = _promoted_blob(item)
        blob = facts.rows.get(blob_id) if blob_id is not None else None
        if blob is not None and not blob.missing and blob.size is not None:
            item.received_bytes = blob.size


def _size_found_late(session: Session, facts: BlobFacts) -> None:
    """Revisit the session's items whose blob was missing when they were ingested and is
    in the store now: their received bytes become the blob's size."""
    blobs = facts.rows
    found = [blob_id for blob_id, blob in blobs.items() if not blob.missing]
    if not found:
        return
    candidates = (
        Item.objects.filter(session=session, type=Item.Type.TOOL_RESULT, blob_refs__blob__in=found)
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
    session.save(update_fields=[*_TOTAL_FIELDS, "updated_at"])


def _set_totals(session: Session, items: list[_NewItem], blob_ids: set[uuid.UUID]) -> None:
    """_update_totals for a session whose items are all *items*, referencing *blob_ids*;
    not saved."""
    session.item_count = len(items)
    session.tool_result_count = sum(item.type == Item.Type.TOOL_RESULT for item in items)
    session.output_bytes_in_history = sum(item.output_bytes for item in items)
    session.output_bytes_received = sum(item.received_bytes for item in items)
    session.blob_count = len(blob_ids)


_TOTAL_FIELDS = (
    "item_count",
    "tool_result_count",
    "output_bytes_in_history",
    "output_bytes_received",
    "blob_count",
)
