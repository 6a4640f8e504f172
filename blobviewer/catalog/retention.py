"""Retention: delete sessions and blobs nobody has touched for a while, leaving tombstones.

`prune(older_than=...)` deletes every session whose newest activity (its last item's
recorded time, or its last ingest, whichever is later) is older than the cut-off, with
its items, its log in `<data>/sessions/` (and with an object store the log uploads kept
in `<prefix>/sessions/`: blobviewer.catalog.session_logs), and then every blob that no remaining
session references and that was itself made before the cut-off (a blob id is a UUID v7,
so the id tells when), with its index and rendering (BlobStore.discard_sync, the same on
a folder and on a bucket). Each pruned session and blob leaves a tombstone row (PrunedSession,
PrunedBlob): ingest skips a pruned session's recording, uploads for it answer 410, and
share links to a pruned blob say what happened instead of showing a 404.

The database rows go in one transaction that re-checks each session's activity under a
row lock, so a session that an ingest or upload grew meanwhile is kept; files are
deleted only after that transaction committed, so a failure never leaves rows that
point at deleted files.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from blobviewer.catalog.blobs import derived_bytes, discard_derived
from blobviewer.catalog.session_logs import kept_recordings, session_logs
from blobviewer.data_dir import blob_store, data_dir, on_object_store, sessions_dir
from blobviewer.models import (
    Blob,
    BlobRef,
    Item,
    PrunedBlob,
    PrunedSession,
    SearchChunk,
    SearchedBlob,
    Session,
    ShareLink,
)
from core.store import BlobStore
from core.store.blob_id import blob_created_at
from core.store.errors import BlobStoreError, StoreUnavailable

# Ids per query: well under every database's limit on query parameters.
_CHUNK = 500

_DURATION = re.compile(r"(?P<number>[0-9]{1,9})(?P<unit>[dhm])")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


class RetentionError(ValueError):
    """A retention setting that makes no sense; the message is one line for the user."""


def parse_older_than(text: str) -> timedelta:
    """`90d`, `12h` or `30m` as a timedelta; raises RetentionError for anything else,
    zero included (pruning everything up to this moment is never what someone meant)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise RetentionError(
            f"--older-than: expected a duration like 90d, 12h or 30m "
            f"(days, hours, minutes), got {shown!r}"
        )
    number = int(match["number"])
    if number == 0:
        raise RetentionError("--older-than: the duration must be more than zero")
    try:
        return timedelta(**{_UNITS[match["unit"]]: number})
    except OverflowError:
        raise RetentionError(f"--older-than: {text.strip()} is too long a time") from None


def cutoff_for(age: timedelta, *, now: datetime | None = None) -> datetime:
    """The moment *age* before *now*; raises RetentionError when that is before year 1."""
    try:
        return (now or timezone.now()) - age
    except OverflowError:
        raise RetentionError("--older-than: that reaches back before the year 1") from None


def pruned_on(moment: datetime) -> str:
    """How messages name the day of a pruning: `2025-09-01` (UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def session_pruned_message(session_id: uuid.UUID, pruned_at: datetime) -> str:
    """The one line that ingest and uploads answer for a pruned session."""
    return (
        f"skipped: session {session_id} was pruned on {pruned_on(pruned_at)}; "
        "use --force to ingest it again"
    )


def upload_refusal(session_id: uuid.UUID | str, blob_ids: Iterable[uuid.UUID]) -> str | None:
    """Why an upload of this session with these blobs must be refused, in one line, when
    the session or any of the blobs was pruned; None when nothing stands in its way."""
    session = PrunedSession.objects.filter(id=session_id).first()
    if session is not None:
        return (
            f"session {session_id} was deleted by retention on {pruned_on(session.pruned_at)}; "
            "it is not recorded again (an admin can: manage.py ingest --force)"
        )
    if blobs := pruned_blobs_among(blob_ids):
        listed = ", ".join(str(tombstone.id) for tombstone in blobs)
        return (
            f"deleted by retention, not stored again: {_count(len(blobs), 'blob')} of this "
            f"upload ({listed}); send the upload without them"
        )
    return None


def pruned_blob(blob_id: uuid.UUID, *, store: BlobStore) -> PrunedBlob | None:
    """The tombstone of a blob that retention deleted and the store does not hold again;
    None otherwise (a blob put back into the store by hand is shown again)."""
    tombstone = PrunedBlob.objects.filter(id=blob_id).first()
    if tombstone is None:
        return None
    try:
        back = store.exists_sync(blob_id)
    except StoreUnavailable:
        raise  # not an answer: the page says the store is not answering
    except BlobStoreError:
        back = False
    return None if back else tombstone


def pruned_blobs_among(blob_ids: Iterable[uuid.UUID]) -> list[PrunedBlob]:
    """The tombstones of the given blob ids, oldest id first."""
    ids = sorted(set(blob_ids))
    found: list[PrunedBlob] = []
    for chunk in _chunks(ids):
        found += PrunedBlob.objects.filter(id__in=chunk)
    return sorted(found, key=lambda tombstone: tombstone.id)


@dataclass(frozen=True)
class PruneReport:
    """What a prune freed, or with `dry_run` what it would free."""

    cutoff: datetime
    dry_run: bool
    session_ids: tuple[uuid.UUID, ...]
    blob_ids: tuple[uuid.UUID, ...]
    items: int
    blob_bytes: int  # the blob files in the store
    log_bytes: int  # session logs in <data>/sessions/
    derived_bytes: int  # renderings in <data>/derived/ and the store's .index/ files
    # Files that could not be deleted (their rows are gone all the same), one line each.
    file_errors: tuple[str, ...] = ()

    @property
    def sessions(self) -> int:
        return len(self.session_ids)

    @property
    def blobs(self) -> int:
        return len(self.blob_ids)

    @property
    def total_bytes(self) -> int:
        return self.blob_bytes + self.log_bytes + self.derived_bytes


def prune(
    *, older_than: timedelta, dry_run: bool = False, now: datetime | None = None
) -> PruneReport:
    """Delete what has been idle for longer than *older_than* (see the module docstring)
    and return what was freed; with *dry_run*, delete nothing and return what would be."""
    cutoff = cutoff_for(older_than, now=now)
    store = blob_store()
    sessions = list(_stale_sessions(cutoff).values_list("id", "source_path"))
    blob_ids = _stale_blobs(cutoff, store=store)
    if dry_run:
        session_ids = [session_id for session_id, _ in sessions]
        return PruneReport(
            cutoff=cutoff,
            dry_run=True,
            session_ids=tuple(session_ids),
            blob_ids=tuple(blob_ids),
            items=sum(
                Item.objects.filter(session_id__in=chunk).count() for chunk in _chunks(session_ids)
            ),
            blob_bytes=sum(_blob_bytes(store, blob_id) for blob_id in blob_ids),
            log_bytes=sum(_size(path) for path in _log_files(sessions))
            + sum(_kept_log_bytes(session_id) for session_id in session_ids),
            derived_bytes=sum(_derived_bytes(store, blob_id) for blob_id in blob_ids),
        )
    with transaction.atomic():
        sessions, items = _delete_sessions(sessions, cutoff)
        blob_ids = _delete_blobs(blob_ids)
    # Only now, after the commit: no row that stays can point at a file deleted here.
    errors: list[str] = []
    log_bytes = _unlink(_log_files(sessions), errors) + _delete_kept_logs(sessions, errors)
    blob_bytes = derived_bytes = 0
    for blob_id in blob_ids:
        freed = _discard_blob(store, blob_id, errors)
        blob_bytes += freed[0]
        derived_bytes += freed[1]
    return PruneReport(
        cutoff=cutoff,
        dry_run=False,
        session_ids=tuple(session_id for session_id, _ in sessions),
        blob_ids=tuple(blob_ids),
        items=items,
        blob_bytes=blob_bytes,
        log_bytes=log_bytes,
        derived_bytes=derived_bytes,
        file_errors=tuple(errors),
    )


# --- what is stale -------------------------------------------------------------------------


def _stale_sessions(cutoff: datetime) -> QuerySet[Session]:
    """Sessions last ingested before *cutoff* with no item recorded at or after it.

    `updated_at` moves on every ingest that adds items (and `ingested_at` is never later),
    so "last ingest" is `updated_at`; an item's `at` is the time its recording gives.
    """
    return Session.objects.filter(updated_at__lt=cutoff).exclude(items__at__gte=cutoff)


def _stale_blobs(cutoff: datetime, *, store: BlobStore) -> list[uuid.UUID]:
    """Blobs made before *cutoff* (the store's files and the index's rows alike) that no
    session outside the stale ones references, in id order. A row left from an earlier
    prune is not counted again; a file that is back in the store is.

    A blob whose id is not a UUID v7 tells no creation time and is kept.
    """
    candidates = {
        blob_id
        for blob_id in store.ids_sync()
        if (created := blob_created_at(blob_id)) is not None and created < cutoff
    }
    # A row kept for its share links after an earlier prune is not pruned again.
    rows = Blob.objects.filter(created_at__lt=cutoff).exclude(
        id__in=PrunedBlob.objects.values("id")
    )
    candidates.update(rows.values_list("id", flat=True))
    kept_sessions = Session.objects.exclude(id__in=_stale_sessions(cutoff).values("id"))
    referenced: set[uuid.UUID] = set()
    for chunk in _chunks(sorted(candidates)):
        referenced.update(
            BlobRef.objects.filter(blob_id__in=chunk, session__in=kept_sessions)
            .values_list("blob_id", flat=True)
            .distinct()
        )
    return sorted(candidates - referenced)


# --- deleting rows (inside the transaction) ------------------------------------------------


def _delete_sessions(
    sessions: Sequence[tuple[uuid.UUID, str]], cutoff: datetime
) -> tuple[list[tuple[uuid.UUID, str]], int]:
    """Delete those of *sessions* that are still stale, leaving tombstones; returns the
    deleted ones and how many items went with them."""
    deleted: list[tuple[uuid.UUID, str]] = []
    items = 0
    now = timezone.now()
    for chunk in _chunks([session_id for session_id, _ in sessions]):
        # Lock first, then look again: an ingest that committed while we waited for the
        # lock is seen by the second query, and one that starts now waits for our commit
        # (it updates the session row) and then finds the tombstone.
        locked = list(
            Session.objects.select_for_update().filter(id__in=chunk).values_list("id", flat=True)
        )
        rows = list(
            _stale_sessions(cutoff).filter(id__in=locked).values_list("id", "title", "source_path")
        )
        ids = [session_id for session_id, _, _ in rows]
        if not ids:
            continue
        _, per_model = Session.objects.filter(id__in=ids).delete()
        items += per_model.get(Item._meta.label, 0)
        PrunedSession.objects.filter(id__in=ids).delete()  # an older tombstone, if any
        PrunedSession.objects.bulk_create(
            PrunedSession(id=session_id, title=title, pruned_at=now)
            for session_id, title, _ in rows
        )
        deleted += [(session_id, source_path) for session_id, _, source_path in rows]
    return deleted, items


def _delete_blobs(blob_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Delete those of *blob_ids* that no session references any more (the pruned
    sessions' references went with them), leaving tombstones; returns them.

    A blob row with share links stays, marked missing, so that the links can say the
    blob was pruned; the others go.
    """
    deleted: list[uuid.UUID] = []
    now = timezone.now()
    for chunk in _chunks(blob_ids):
        # Locked, so an ingest cannot link one of them to a session until we commit.
        list(Blob.objects.select_for_update().filter(id__in=chunk).values_list("id", flat=True))
        referenced = set(
            BlobRef.objects.filter(blob_id__in=chunk).values_list("blob_id", flat=True)
        )
        doomed = [blob_id for blob_id in chunk if blob_id not in referenced]
        if not doomed:
            continue
        shared = set(ShareLink.objects.filter(blob_id__in=doomed).values_list("blob_id", flat=True))
        Blob.objects.filter(
            id__in=[blob_id for blob_id in doomed if blob_id not in shared]
        ).delete()
        Blob.objects.filter(id__in=shared).update(
            missing=True, size=None, count=None, error="", indexed_at=now
        )
        # Its text must not stay findable (the other rows take theirs along by cascade).
        SearchChunk.objects.filter(blob_id__in=shared).delete()
        SearchedBlob.objects.filter(blob_id__in=shared).delete()
        PrunedBlob.objects.filter(id__in=doomed).delete()
        PrunedBlob.objects.bulk_create(PrunedBlob(id=blob_id, pruned_at=now) for blob_id in doomed)
        deleted += doomed
    return deleted


# --- files ---------------------------------------------------------------------------------


def _kept_log_bytes(session_id: uuid.UUID) -> int:
    """The size of the session's log in the object store (`<prefix>/sessions/`), and of the
    recordings ingest kept for it (`<prefix>/sessions/<id>/`); 0 without one (the data
    directory's `sessions/` is _log_files')."""
    if not on_object_store():
        return 0
    try:
        return (session_logs().size(session_id) or 0) + _kept_recording_bytes(session_id)
    except BlobStoreError:
        return 0


def _kept_recording_bytes(session_id: uuid.UUID) -> int:
    copies = kept_recordings()
    return 0 if copies is None else sum(info.size for info in copies.kept(session_id))


def _delete_kept_logs(sessions: Sequence[tuple[uuid.UUID, str]], errors: list[str]) -> int:
    """Delete the logs of *sessions* that uploads kept in the object store; the bytes."""
    if not on_object_store():
        return 0
    logs = session_logs()
    freed = 0
    copies = kept_recordings()
    for session_id, _ in sessions:
        try:
            freed += logs.delete(session_id)
        except BlobStoreError as error:
            errors.append(f"{logs.location(session_id)}: could not be deleted: {error}")
        if copies is None:
            continue
        try:  # what ingest kept of the recordings (blobviewer.ingest.kept_recordings)
            freed += copies.delete(session_id)
        except BlobStoreError as error:
            errors.append(f"the kept recording of session {session_id}: {error}")
    return freed


def _log_files(sessions: Sequence[tuple[uuid.UUID, str]]) -> list[Path]:
    """The log files of *sessions* inside `<data>/sessions/`: `<id>.jsonl`, and the file
    a session was ingested from when that lies in the same folder and no remaining session
    was read from it; and the spans an OpenTelemetry conversation sent, `<data>/otlp/<id>.jsonl`.
    Nothing outside those folders is ever named here."""
    folder = sessions_dir()
    try:
        root = folder.resolve()
    except OSError:
        return []
    pruned = {session_id for session_id, _ in sessions}
    files: dict[Path, None] = {}
    for session_id, source_path in sessions:
        files.setdefault(folder / f"{session_id}.jsonl", None)
        # The spans the OTLP receiver kept of a conversation (blobviewer.otlp.receiving).
        files.setdefault(data_dir() / "otlp" / f"{session_id}.jsonl", None)
        source = Path(source_path) if source_path else None
        if (
            source is not None
            and source.is_absolute()
            and not source.name.startswith(".")
            and _inside(source.parent, root)
            and not _read_by_others(source_path, pruned)
        ):
            files.setdefault(source, None)
    return list(files)


def _read_by_others(source_path: str, pruned: set[uuid.UUID]) -> bool:
    """Whether a session that is not being pruned was ingested from this file."""
    readers = Session.objects.filter(source_path=source_path).values_list("id", flat=True)
    return any(session_id not in pruned for session_id in readers)


def _inside(folder: Path, root: Path) -> bool:
    try:
        return folder.resolve().is_relative_to(root)
    except OSError:
        return False


def _blob_bytes(store: BlobStore, blob_id: uuid.UUID) -> int:
    try:
        return store.size_sync(blob_id)
    except BlobStoreError:
        return 0


def _index_bytes(store: BlobStore, blob_id: uuid.UUID) -> int:
    """The bytes of the blob's index in the store (`.index/`, docs/store.md#the-blob-index)."""
    index = store.index_reader_sync(str(blob_id))
    if index is None:
        return 0
    with index:
        return index.size


def _derived_bytes(store: BlobStore, blob_id: uuid.UUID) -> int:
    """The bytes of the blob's index, and of its rendering in `derived/` with that
    rendering's line index."""
    return _index_bytes(store, blob_id) + derived_bytes(blob_id)


def _discard_blob(store: BlobStore, blob_id: uuid.UUID, errors: list[str]) -> tuple[int, int]:
    """Delete the blob with its index and its derived files; returns the bytes freed (of
    the blob, of the rest). What cannot be deleted is told in *errors*; the rest still goes."""
    blob_bytes, index_bytes = _blob_bytes(store, blob_id), _index_bytes(store, blob_id)
    try:
        store.discard_sync(blob_id)  # and its index
    except BlobStoreError as error:
        errors.append(f"blob {blob_id}: could not be deleted: {error}")
        blob_bytes = index_bytes = 0
    try:
        rendered_bytes = discard_derived(blob_id)
    except BlobStoreError as error:
        errors.append(f"the rendering of blob {blob_id}: could not be deleted: {error}")
        rendered_bytes = 0
    return blob_bytes, index_bytes + rendered_bytes


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _unlink(paths: Iterable[Path], errors: list[str]) -> int:
    """Delete the files that exist; returns the bytes they held. A symlink is removed
    itself, never what it points at. A file that cannot be deleted is told in *errors*
    and the others still go."""
    freed = 0
    for path in paths:
        size = _size(path)
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as error:
            errors.append(f"{path}: could not be deleted: {error.strerror}")
            continue
        freed += size
    return freed


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _chunks(ids: Sequence[uuid.UUID]) -> Iterator[list[uuid.UUID]]:
    for start in range(0, len(ids), _CHUNK):
        yield list(ids[start : start + _CHUNK])
