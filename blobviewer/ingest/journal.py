"""The ingest journal: the blobs an ingest wrote before the transaction that references
them committed, so that those a killed ingest leaves can be told from the blobs agents and
the CLI write straight into the store, and removed
(docs/store.md#blobs-of-a-killed-ingest).

Promotion writes each output's blob before the transaction that records its item, so that
the database is not held locked while files are written (blobviewer.ingest.promotion). An
ingest killed in between (kill -9, the OOM killer) leaves blobs that no row references and
nothing else knows: their ids were fresh. So each try of an ingest keeps a journal,
`<data>/ingest-journal/<pid>-<random>.ids`: a header line, then the id of every blob it
writes, a line each, written before the blob exists. The ingest holds an exclusive flock on
its journal from before the journal has a line until it is deleted: once the transaction
committed (every id is then referenced) or the blobs were discarded (the ingest failed).

A journal nobody holds locked is a dead ingest's: the lock goes with the process however
it ends, and a new process never takes an old one's lock (unlike a pid, which the system
reuses). settle_journals (`manage.py ingest` at start, `manage.py blobs gc`) deletes each
blob such a journal lists that no item references and no share link shows, with its blob
index, its rendering in `derived/` and the catalog row `blobs index` may have made of it,
then the journal. Blobs that agents or the CLI wrote are in no journal: never touched.
With an object store the journal is still a file in the data folder of the host that
ingests; that host settles it (docs/object-storage.md).

Lines are written, not flushed to the disk: they survive the death of the process, which is
what they are for. A power cut may lose the last ones, as it may lose the blobs themselves
(the store does not fsync them either); an fsync per ingest would cost more than ingesting
a small session does (about 5 ms on a local disk).

On PostgreSQL, the server may finish a COMMIT that a client sent just before it was
killed; a journal names its database session (the server's backend pid), and is settled
only once that session is no longer in a transaction.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection, transaction

from blobviewer.catalog.blobs import discard_derived
from blobviewer.data_dir import data_dir
from blobviewer.models import Blob, BlobRef, ShareLink
from core.store import BlobNotFound, BlobStore, BlobStoreError

JOURNAL_FOLDER = "ingest-journal"
JOURNAL_SUFFIX = ".ids"
# How long settling waits for a dead ingest's database session to leave its transaction
# (the server notices a killed client at once; this is for a COMMIT it is still writing).
FINISHING_WAIT_SECONDS = 5.0
# Ids per query: well under every database's limit on query parameters.
_CHUNK = 500


def journal_folder() -> Path:
    """Where the journals are: `ingest-journal/` in the data folder."""
    return data_dir() / JOURNAL_FOLDER


class IngestJournal:
    """The journal of one try of an ingest. record() each blob id before its blob is
    written; remove() once the transaction committed or the blobs were discarded; close()
    leaves it to settle_journals. The file is made at the first record(): an ingest that
    stores no blob makes none. Dropped without either, it is closed (and so unlocked) by
    the garbage collector, and left to settle."""

    def __init__(self, folder: Path | None = None) -> None:
        self._folder = folder
        self._fd: int | None = None
        self._closer: weakref.finalize[Any, IngestJournal] | None = None
        self.path: Path | None = None

    def record(self, blob_id: uuid.UUID) -> None:
        """Add *blob_id*; raises OSError when it cannot (then its blob must not be written)."""
        fd = self._fd if self._fd is not None else self._open()
        os.write(fd, f"{blob_id}\n".encode())

    def remove(self) -> None:
        """Delete the journal: nothing it lists is left to settle. Never raises: a journal
        that stays is settled later, and finds each id referenced or gone."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
        self.close()

    def close(self) -> None:
        """Release the journal's lock and leave its file, for settle_journals."""
        if self._closer is not None:
            self._closer()  # os.close, once
        self._fd = self._closer = None

    def _open(self) -> int:
        folder = self._folder or journal_folder()
        folder.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        while True:
            path = folder / f"{os.getpid()}-{uuid.uuid4().hex}{JOURNAL_SUFFIX}"
            fd = os.open(path, flags, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink:
                break
            # Between its creation and the lock a settle took the empty file for a dead
            # ingest's journal and removed it: another name.
            os.close(fd)
        self._closer = weakref.finalize(self, os.close, fd)
        self._fd, self.path = fd, path
        header = {"pid": os.getpid(), "database_session": _database_session()}
        os.write(fd, f"{json.dumps(header)}\n".encode())
        return fd


def _database_session() -> int | None:
    """The PostgreSQL backend pid of this thread's connection (libpq knows it: no query);
    None on another database."""
    if connection.vendor != "postgresql":
        return None
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    return pid if isinstance(pid, int) else None


# --- settling dead ingests' journals -------------------------------------------------------


@dataclass
class Settled:
    """What settle_journals did: the dead ingests' *journals* it settled; the *blobs* they
    listed that the store had and no row references, deleted (with dry_run: to delete),
    and their *size* in bytes; journals of ingests still *running*; those of dead ingests
    whose database session is still *finishing* a transaction (left for the next settle);
    and what failed (that journal is kept, to be settled again)."""

    journals: int = 0
    blobs: int = 0
    size: int = 0
    running: int = 0
    finishing: int = 0
    failures: list[str] = field(default_factory=list)

    def lines(self, *, dry_run: bool = False) -> list[str]:
        """What to tell the operator: blobs removed, journals left for later."""
        said = []
        if self.blobs:
            verb = "Would remove" if dry_run else "Removed"
            said.append(
                f"{verb} {self.blobs:,} blob{'s' if self.blobs != 1 else ''} that killed "
                f"ingests wrote and no session references ({self.size:,} bytes)"
            )
        if self.finishing:
            said.append(
                f"Left {self.finishing:,} killed ingest journal"
                f"{'s' if self.finishing != 1 else ''} whose database session is still in a "
                "transaction, for the next ingest or blobs gc"
            )
        return said


def settle_journals(
    store: BlobStore, *, dry_run: bool = False, folder: Path | None = None
) -> Settled:
    """Settle every journal of a dead ingest in *folder* (default: the data folder's): the
    blobs it lists that no item references and no share link shows are deleted from
    *store* with their catalog rows, then the journal. With *dry_run*, only count them.
    Never raises for one journal or blob: what failed is listed in the answer."""
    settled = Settled()
    folder = folder or journal_folder()
    try:
        paths = sorted(path for path in folder.iterdir() if path.name.endswith(JOURNAL_SUFFIX))
    except FileNotFoundError:
        return settled
    except OSError as error:
        settled.failures.append(f"cannot list {folder}: {error.strerror}")
        return settled
    for path in paths:
        _settle(path, store, settled, dry_run=dry_run)
    return settled


def settle_at_start(store: BlobStore) -> list[str]:
    """settle_journals before an ingest writes; what to say about it (nothing, usually).
    The ingest goes on whatever happens here."""
    settled = settle_journals(store)
    failures = [f"a killed ingest's blobs: {failure}" for failure in settled.failures]
    return settled.lines() + failures


def _settle(path: Path, store: BlobStore, settled: Settled, *, dry_run: bool) -> None:
    """Settle the journal *path* if its ingest is dead (its lock is free)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # its ingest finished meanwhile
    except OSError as error:
        settled.failures.append(f"cannot open {path}: {error.strerror}")
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            settled.running += 1
            return
        if not os.fstat(fd).st_nlink:
            return  # removed between the listing and the lock: its ingest finished
        header, ids = _read(path)
        if _still_finishing(header.get("database_session")):
            settled.finishing += 1
            return
        failures = len(settled.failures)
        blobs, size = _delete_unreferenced(ids, store, settled.failures, dry_run=dry_run)
        settled.journals += 1
        settled.blobs += blobs
        settled.size += size
        if not dry_run and len(settled.failures) == failures:
            path.unlink(missing_ok=True)
    except OSError as error:
        settled.failures.append(f"cannot settle {path}: {error.strerror or error}")
    finally:
        os.close(fd)


def _read(path: Path) -> tuple[dict[str, Any], list[uuid.UUID]]:
    """A journal's header and the ids it lists (a line that is no id is skipped)."""
    lines = path.read_bytes().decode("ascii", "replace").splitlines()
    header: dict[str, Any] = {}
    if lines and lines[0].startswith("{"):
        with contextlib.suppress(ValueError):
            parsed = json.loads(lines[0])
            header = parsed if isinstance(parsed, dict) else {}
    ids = []
    for line in lines:
        with contextlib.suppress(ValueError):
            ids.append(uuid.UUID(line))
    return header, ids


def _still_finishing(backend: object) -> bool:
    """Whether the PostgreSQL session *backend* is still in a transaction (a COMMIT its
    killed client sent may still be landing), after waiting a little for it to end."""
    if not isinstance(backend, int) or connection.vendor != "postgresql":
        return False
    deadline = time.monotonic() + FINISHING_WAIT_SECONDS
    while True:
        with connection.cursor() as cursor:
            # Never our own session (the server reused the pid); one that is in no
            # transaction has no commit to land.
            cursor.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND pid <> pg_backend_pid() "
                "AND xact_start IS NOT NULL",
                [backend],
            )
            if cursor.fetchone() is None:
                return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)


def _delete_unreferenced(
    ids: Sequence[uuid.UUID], store: BlobStore, failures: list[str], *, dry_run: bool
) -> tuple[int, int]:
    """Delete the blobs among *ids* that no row references: their catalog rows, then their
    files (the blob, its index, its rendering). How many the store had, and their bytes."""
    blobs = size = 0
    for blob_id in _unreferenced(ids, forget=not dry_run):
        try:
            blob_size: int | None = store.size_sync(blob_id)
        except BlobNotFound:
            blob_size = None  # never written (killed just before), or discarded already
        except BlobStoreError:
            blob_size = 0
        if not dry_run:
            try:
                store.discard_sync(blob_id)  # with its index
                discard_derived(blob_id)
            except BlobStoreError as error:
                failures.append(f"blob {blob_id} could not be deleted: {error}")
                continue
        if blob_size is not None:
            blobs += 1
            size += blob_size
    return blobs, size


def _unreferenced(ids: Sequence[uuid.UUID], *, forget: bool) -> list[uuid.UUID]:
    """Those of *ids* that no item references and no share link shows; with *forget*, the
    catalog rows `blobs index` may have made of them are deleted (their search text goes
    with them), each chunk in a transaction that locks the rows first, as prune does."""
    found: list[uuid.UUID] = []
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        with transaction.atomic():
            if forget:
                list(Blob.objects.select_for_update().filter(id__in=chunk).values_list("id"))
            kept = set(BlobRef.objects.filter(blob_id__in=chunk).values_list("blob_id", flat=True))
            kept |= set(
                ShareLink.objects.filter(blob_id__in=chunk).values_list("blob_id", flat=True)
            )
            doomed = [blob_id for blob_id in chunk if blob_id not in kept]
            if forget:
                Blob.objects.filter(id__in=doomed).delete()
        found += doomed
    return found
