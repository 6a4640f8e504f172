"""Reading recordings ahead, in a worker process, while ingest writes the one before.

Reading and parsing a recording (its JSON, the importer, the digests of its records) is
about a third of an ingest's work and needs nothing from the database, so `manage.py
ingest` hands the next files to one worker process while it promotes and writes the
current one: on two cores the reading costs no time. What the worker read comes back
pickled, through memory the two processes share (see RecordingReader); a file the
worker could not read, or whose reading it could not send back, is read again in the
command's own process, which then raises its error exactly where and as it would have
without a worker.

Given a blob store of files, the worker also promotes the tool outputs of the sessions the
database did not have when the command started (see ingest.PromotedAhead): storing the
blobs and summarising them is about a third of what the command would do for a new
session. A promotion ingest does not take (another file of the same session, recorded
first) is discarded, and so is what was read ahead of files never taken.

Only the first pass of a plain ingest reads ahead (not `--watch`, whose changes come one
at a time); a machine with one core, or a single file, reads in the process itself.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import pickle
import signal
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

from django.db import DatabaseError

from blobviewer.ingest.sessions import Opened, PromotedAhead, discard_blobs, open_recording
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
    as a context manager, which stops the worker.

    The worker is a fork of this process that knows the paths: the command only tells it
    how far it may read (see AHEAD_FILES), and it tells the command which file it has
    read. What it read it writes, pickled, into one of AHEAD_FILES + 1 anonymous memory
    files the two share (made before the fork: they go with the processes, whatever ends
    them), which the command loads when it takes the file. So the worker never waits for
    the command to make room in a pipe, and the command needs no threads to receive (a
    thread waits for the interpreter lock while the command works, holding the worker up
    in turn: with a pool's pipe and threads, the worker stood still a fifth of the time
    and the command took 10% more CPU)."""

    def __init__(self, paths: Sequence[Path], *, store: BlobStore | None = None) -> None:
        self._paths = list(paths)
        self._store = store if isinstance(store, FsBlobStore) else None
        self._next = 0  # the worker may read the files before this index
        self._pending: dict[int, int] = {}  # files it may read, not taken yet: their sizes
        # Files the worker is done with, not taken yet: what it left (see _Left).
        self._arrived: dict[int, _Left] = {}
        self._taken = 0
        # The index of the file the command is writing (or waiting for), where the
        # worker sees it: memory shared across the fork (None: no worker).
        self._writing: Any = None
        self._worker: BaseProcess | None = None
        self._grants: Connection | None = None  # to the worker: how far it may read
        self._results: Connection | None = None  # from the worker: (index, _Left)
        self._slots: list[int] = []  # the shared memory files (descriptors)
        self._ahead_files = AHEAD_FILES  # as many as there are slots, less one
        if (
            len(self._paths) > 1
            and cores() > 1
            and _FORK in multiprocessing.get_all_start_methods()
        ):
            try:
                self._start()
            except OSError:  # no processes, pipes or memory files here: read in-process
                self.close()

    def _start(self) -> None:
        context = multiprocessing.get_context(_FORK)
        known = self._known_sessions()
        # One slot more than files may be read ahead: the worker may fill the slot of the
        # last file the command may ask for while the command loads the one it took.
        for _ in range(self._ahead_files + 1):
            self._slots.append(_memory_file())
        self._writing = context.RawValue("q", 0)
        grants, self._grants = context.Pipe(duplex=False)
        self._results, results = context.Pipe(duplex=False)
        # The worker closes the command's ends of the pipes, which it inherits: so it sees
        # their end when the command is gone, however it ended (not to be left waiting).
        ends = _Ends(grants, results, commands=(self._grants, self._results))
        worker = context.Process(
            target=_work,
            args=(self._paths, self._slots, self._store, known, self._writing, ends),
            name="blobviewer read-ahead",
            daemon=True,
        )
        # The worker is a fork of this process, database connections and all, and must
        # never close one of them (closing sends the server the end of *our* session):
        # everything that exists at the fork is kept out of its garbage collector, and
        # the worker collects nothing.
        gc.freeze()
        try:
            worker.start()
        finally:
            gc.unfreeze()
            grants.close()
            results.close()
        self._worker = worker
        self._submit()

    def take(self, path: Path) -> Opened | None:
        """What the worker read of *path*, the next of the paths in order; None when it
        could not (read it with ingest's own reading, which raises its errors)."""
        index = self._taken
        self._taken += 1
        if self._writing is not None:
            self._writing.value = index
        if self._worker is None or self._pending.pop(index, None) is None:
            return None
        self._submit()
        if self._paths[index] != path:
            self._discard(index, self._arrival(index))
            return None
        return self._load(index, self._arrival(index))

    @property
    def ahead(self) -> int:
        """How many files are read (or being read) ahead and not taken yet."""
        return len(self._pending)

    @property
    def ready(self) -> int:
        """How many files are read ahead, waiting to be taken."""
        self._drain()
        return sum(index in self._arrived for index in self._pending)

    def _submit(self) -> None:
        """Let the worker read as far ahead as AHEAD_FILES and AHEAD_BYTES allow."""
        if self._grants is None:
            return
        granted = self._next
        while self._next < len(self._paths) and self._room():
            self._pending[self._next] = _size(self._paths[self._next])
            self._next += 1
        if self._next != granted:
            try:
                self._grants.send(self._next)
            except OSError:  # the worker is gone: what it sent is still taken, then no more
                self._grants.close()
                self._grants = None
                for index in range(granted, self._next):
                    del self._pending[index]
                self._next = granted

    def _room(self) -> bool:
        """Whether another file may be read ahead (see AHEAD_FILES)."""
        held = sum(self._pending.values())
        within = len(self._pending) < self._ahead_files and held < AHEAD_BYTES
        return not self._pending or within

    def _arrival(self, index: int) -> _Left:
        """What the worker left of the file at *index*, once it is done with it (nothing
        if it stopped before)."""
        while index not in self._arrived:
            if self._results is None or self._worker is None:
                return _NOTHING
            wait([self._results, self._worker.sentinel])
            if not self._receive():
                self.close()  # the worker died (killed, out of memory): read here
                return _NOTHING
        return self._arrived.pop(index)

    def _receive(self) -> bool:
        """Take one message of the worker's, if there is one; False when it is gone."""
        assert self._results is not None
        try:
            if not self._results.poll():
                return self._worker is not None and self._worker.is_alive()
            index, left = self._results.recv()
        except (EOFError, OSError):
            return False
        self._arrived[index] = left
        return True

    def _drain(self) -> None:
        """Take every message the worker has sent so far."""
        while self._results is not None and self._results.poll() and self._receive():
            pass

    def _load(self, index: int, left: _Left) -> Opened | None:
        """What the worker left in the slot of the file at *index*."""
        size, made = left
        if size is None or not self._slots:
            return None
        slot = self._slots[_slot(index, self._slots)]
        try:
            data = _read_all(slot, size)
            os.ftruncate(slot, 0)  # its memory is free again
            opened: Opened = pickle.loads(data)
        except Exception:  # noqa: BLE001 - what it read did not come back: read here
            if self._store is not None:  # and the blobs it promoted are nobody's
                discard_blobs(self._store, made)
            return None
        return opened

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

    def close(self) -> None:
        """Stop the worker: files not started are not read, the one under way ends; what
        was promoted ahead of files not taken is discarded."""
        worker, self._worker = self._worker, None
        if worker is not None:
            if self._grants is not None:
                with contextlib.suppress(OSError):
                    self._grants.send(_STOP)
            worker.join()
            worker.close()
            self._drain()
        for index, left in self._arrived.items():
            self._discard(index, left)
        self._arrived.clear()
        self._pending.clear()
        for connection in (self._grants, self._results):
            if connection is not None:
                connection.close()
        self._grants = self._results = None
        for slot in self._slots:
            os.close(slot)
        self._slots = []

    def _discard(self, index: int, left: _Left) -> None:
        """Delete what the worker promoted of a file read ahead but not taken."""
        if self._store is None or not left.made:
            return
        opened = self._load(index, left)
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


def _memory_file() -> int:
    """A file in memory, nameless (a descriptor): gone once no process has it open."""
    with contextlib.suppress(AttributeError, OSError):  # Linux, unless a sandbox refuses
        return os.memfd_create("blobviewer-read-ahead", os.MFD_CLOEXEC)
    with tempfile.TemporaryFile() as file:  # elsewhere: a file deleted as soon as made
        return os.dup(file.fileno())


class _Left(NamedTuple):
    """What the worker left of a file: the size of what it read, pickled into the file's
    slot (None: nothing, the command reads the file itself), and the blobs it promoted
    (discarded should what it read not come back)."""

    size: int | None
    made: tuple[uuid.UUID, ...] = ()


_NOTHING = _Left(None)


class _Ends(NamedTuple):
    """The worker's ends of the pipes, and the command's, which it closes."""

    grants: Connection
    results: Connection
    commands: tuple[Connection | None, Connection | None]


def _slot(index: int, slots: Sequence[int]) -> int:
    """Which of *slots* holds the file at *index*, read ahead."""
    return index % len(slots)


def _read_all(slot: int, size: int) -> bytes:
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(slot, size - offset, offset)
        if not chunk:
            raise EOFError("the memory file is shorter than the worker said")
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


_STOP = -1  # sent to the worker instead of how far it may read: stop


def _work(
    paths: list[Path],
    slots: list[int],
    store: FsBlobStore | None,
    known: frozenset[uuid.UUID],
    writing: Any,
    ends: _Ends,
) -> None:
    """The worker: reads the files in order, as far as the command allows, and says which
    it has read (see RecordingReader)."""
    _start_worker(store, known, writing)
    for end in ends.commands:
        if end is not None:
            end.close()
    grants, results = ends.grants, ends.results
    allowed = 0
    try:
        for index, path in enumerate(paths):
            while grants.poll() or index >= allowed:
                allowed = grants.recv()
                if allowed == _STOP:
                    return
            opened = read(path, index)
            left = _deliver(opened, slots, index)
            try:
                results.send((index, left))
            except OSError:
                _discard_promoted(opened)
                raise
    except (EOFError, OSError):  # the command is gone
        return


def _deliver(opened: Opened | None, slots: list[int], index: int) -> _Left:
    """Leave *opened* for the command in its slot (or nothing: it could not be left, and
    what was promoted ahead of it is discarded)."""
    if opened is None:
        return _NOTHING
    slot = slots[_slot(index, slots)]
    try:
        data = memoryview(pickle.dumps(opened, protocol=pickle.HIGHEST_PROTOCOL))
        written = 0
        while written < len(data):
            written += os.pwrite(slot, data[written:], written)
    except Exception:  # noqa: BLE001 - no memory, or it does not pickle: the command reads it
        _discard_promoted(opened)
        with contextlib.suppress(OSError):
            os.ftruncate(slot, 0)
        return _NOTHING
    made = tuple(opened.promoted.blob_ids()) if opened.promoted is not None else ()
    return _Left(len(data), made)


def _discard_promoted(opened: Opened | None) -> None:
    if opened is not None and opened.promoted is not None and _store is not None:
        opened.promoted.discard_unused(_store)


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
