"""Reading recordings ahead, in a worker process, while ingest writes the one before.

Reading and parsing a recording (its JSON, the importer, the digests of its records) is
about a third of an ingest's work and needs nothing from the database, so `manage.py
ingest` hands the next files to one worker process while it promotes and writes the
current one: on two cores the reading costs no time. What the worker read comes back
pickled (a small cost beside parsing it); a file the worker could not read, or whose
reading it could not send back, is read again in the command's own process, which then
raises its error exactly where and as it would have without a worker.

Given a blob store of files, the worker also promotes the tool outputs of the sessions the
database did not have when the command started (see ingest.PromotedAhead): storing the
blobs and summarising them is about a third of what the command would do for a new
session. A promotion ingest does not take (another file of the same session, recorded
first) is discarded, and so is what was read ahead of files never taken.

Only the first pass of a plain ingest reads ahead (not `--watch`, whose changes come one
at a time); a machine with one core, or a single file, reads in the process itself.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from django.db import DatabaseError

from blobviewer.ingest import Opened, PromotedAhead, open_recording
from blobviewer.models import PrunedSession, Session
from core.store import BlobStore, FsBlobStore

# How far the worker reads ahead of the file being written: every file read is held in
# memory until it is written, so at most this many files and (beyond the next one) this
# many bytes of them. Deep enough that the worker, done with a run of small files, is
# already reading the big one that follows while the command writes those (two files
# ahead left the command waiting for the reader a quarter of the time on the real
# recordings, whose sizes vary a hundredfold).
AHEAD_FILES = 16
AHEAD_BYTES = 32 * 1024 * 1024
# How many files ahead of the one the command is writing the worker must be to promote
# the outputs of the file it starts on as well (2: the file between them is read).
PROMOTE_LEAD = 2
_FORK = "fork"  # the worker starts with what this process has loaded (not on Windows)


class RecordingReader:
    """Reads *paths* ahead, in order; `take(path)` gives what was read of each (or None:
    the caller reads it itself), with the outputs of new sessions promoted into *store*
    when it is a store of files (a client of an object store must not cross a fork). Use
    as a context manager, which stops the worker."""

    def __init__(self, paths: Sequence[Path], *, store: BlobStore | None = None) -> None:
        self._paths = list(paths)
        self._store = store if isinstance(store, FsBlobStore) else None
        self._next = 0
        # The files read ahead and not taken yet, by index: the read, and the file's size.
        self._pending: dict[int, tuple[Future[Opened | None], int]] = {}
        self._taken = 0
        # The index of the file the command is writing (or waiting for), where the
        # worker sees it: memory shared across the fork (None: no worker).
        self._writing: Any = None
        self._pool: ProcessPoolExecutor | None = None
        if (
            len(self._paths) > 1
            and cores() > 1
            and _FORK in multiprocessing.get_all_start_methods()
        ):
            # The worker is a fork of this process, database connections and all, and
            # must never close one of them (closing sends the server the end of *our*
            # session): everything that exists at the fork is kept out of its garbage
            # collector, and the worker collects nothing.
            known = self._known_sessions()
            gc.freeze()
            try:
                self._writing = multiprocessing.get_context(_FORK).RawValue("q", 0)
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context(_FORK),
                    initializer=_start_worker,
                    initargs=(self._store, known, self._writing),
                )
                self._submit()  # forks the worker now (a fork pool starts at once)
            except OSError:  # no processes or semaphores to be had here: read in-process
                self.close()
            finally:
                gc.unfreeze()

    def take(self, path: Path) -> Opened | None:
        """What the worker read of *path*, the next of the paths in order; None when it
        could not (read it with ingest's own reading, which raises its errors)."""
        index = self._taken
        self._taken += 1
        if self._writing is not None:
            self._writing.value = index
        pending = self._pending.pop(index, None)
        if self._pool is None or pending is None:
            return None
        future, _ = pending
        if self._paths[index] != path:
            self._discard(future)
            return None
        self._submit()
        try:
            return future.result()
        except BrokenProcessPool:  # the worker died (killed, out of memory): read here
            self.close()
            return None
        except Exception:  # noqa: BLE001 - what it read could not come back: read here
            return None

    @property
    def ahead(self) -> int:
        """How many files are read (or being read) ahead and not taken yet."""
        return len(self._pending)

    def _submit(self) -> None:
        while self._pool is not None and self._next < len(self._paths) and self._room():
            path = self._paths[self._next]
            try:
                future = self._pool.submit(read, path, self._next)
            except (BrokenProcessPool, RuntimeError):
                self.close()
                return
            self._pending[self._next] = (future, _size(path))
            self._next += 1

    @property
    def ready(self) -> int:
        """How many files are read ahead, waiting to be taken."""
        return sum(future.done() for future, _ in self._pending.values())

    def _known_sessions(self) -> frozenset[uuid.UUID]:
        """The ids of the sessions the database has, and of pruned ones, for the worker
        to leave their outputs to ingest; when they cannot be had, the worker promotes
        nothing."""
        if self._store is None:
            return frozenset()
        try:
            return frozenset(Session.objects.values_list("id", flat=True)) | frozenset(
                PrunedSession.objects.values_list("id", flat=True)
            )
        except DatabaseError:
            self._store = None
            return frozenset()

    def _room(self) -> bool:
        """Whether another file may be read ahead (see AHEAD_FILES)."""
        held = sum(size for _, size in self._pending.values())
        return not self._pending or (len(self._pending) < AHEAD_FILES and held < AHEAD_BYTES)

    def close(self) -> None:
        """Stop the worker: reads not started are cancelled, the one under way ends."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        for future, _ in self._pending.values():
            self._discard(future)
        self._pending.clear()

    def _discard(self, future: Future[Opened | None]) -> None:
        """Delete what the worker promoted of a file read ahead but not taken (called
        once the worker is done with it)."""
        if self._store is None or future.cancelled():
            return
        try:
            opened = future.result()
        except Exception:  # noqa: BLE001 - a read that failed promoted nothing
            return
        if opened is not None and opened.promoted is not None:
            opened.promoted.discard_unused(self._store)

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def read(path: Path, index: int) -> Opened | None:
    """In the worker: *path*, the file at *index* of the reader's paths, read and parsed,
    or None if that failed in any way. The outputs of its new sessions are promoted too
    when the worker is PROMOTE_LEAD files ahead of the command: so each process takes on
    what the other has no time for (promoting costs about as much as reading), and the
    command seldom waits for a worker busy with what it could have done itself."""
    try:
        opened = open_recording(path)
    except Exception:  # noqa: BLE001 - the command reads it again and reports the error
        return None
    if not opened.travels():
        return None
    if _store is None or index - _writing.value < PROMOTE_LEAD:
        return opened
    return replace(opened, promoted=PromotedAhead.of(opened, store=_store, known=_known))


# In the worker: the store it promotes into (None: it does not), and the sessions that
# were in the database (or pruned) when it started, whose outputs it leaves to ingest.
_store: FsBlobStore | None = None
_known: frozenset[uuid.UUID] = frozenset()
_writing: Any = None  # the index of the file the command is on (a shared ctypes integer)


def _size(path: Path) -> int:
    """What reading *path* ahead holds, about: a file's size (a folder of events counts
    as 1 MB, which is more than most)."""
    try:
        return path.stat().st_size if path.is_file() else 1024 * 1024
    except OSError:
        return 0


def _start_worker(store: FsBlobStore | None, known: frozenset[uuid.UUID], writing: Any) -> None:
    global _store, _known, _writing
    _store, _known, _writing = store, known, writing
    gc.disable()  # see RecordingReader: the objects it shares with its parent stay alive
    # Ctrl-C reaches the whole process group: the command decides when to stop (after the
    # file it is writing), so the worker ignores it; SIGTERM ends it as it would any other.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
