"""Reading recordings ahead, in a worker process, while ingest writes the one before.

Reading and parsing a recording (its JSON, the importer, the digests of its records) is
about a third of an ingest's work and needs nothing from the database, so `manage.py
ingest` hands the next files to one worker process while it promotes and writes the
current one: on two cores the reading costs no time. What the worker read comes back
pickled (a small cost beside parsing it); a file the worker could not read, or whose
reading it could not send back, is read again in the command's own process, which then
raises its error exactly where and as it would have without a worker.

Only the first pass of a plain ingest reads ahead (not `--watch`, whose changes come one
at a time); a machine with one core, or a single file, reads in the process itself.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import TracebackType

from blobviewer.ingest import Opened, open_recording

# How far the worker reads ahead of the file being written: every file read is held in
# memory until it is written, so at most this many files and (beyond the next one) this
# many bytes of them. Deep enough that the worker, done with a run of small files, is
# already reading the big one that follows while the command writes those (two files
# ahead left the command waiting for the reader a quarter of the time on the real
# recordings, whose sizes vary a hundredfold).
AHEAD_FILES = 16
AHEAD_BYTES = 32 * 1024 * 1024
_FORK = "fork"  # the worker starts with what this process has loaded (not on Windows)


class RecordingReader:
    """Reads *paths* ahead, in order; `take(path)` gives what was read of each (or None:
    the caller reads it itself). Use as a context manager, which stops the worker."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._paths = list(paths)
        self._next = 0
        # The files read ahead and not taken yet, by index: the read, and the file's size.
        self._pending: dict[int, tuple[Future[Opened | None], int]] = {}
        self._taken = 0
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
            gc.freeze()
            try:
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context(_FORK),
                    initializer=_start_worker,
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
        pending = self._pending.pop(index, None)
        if self._pool is None or pending is None or self._paths[index] != path:
            return None
        self._submit()
        future, _ = pending
        try:
            return future.result()
        except BrokenProcessPool:  # the worker died (killed, out of memory): read here
            self.close()
            return None

    @property
    def ahead(self) -> int:
        """How many files are read (or being read) ahead and not taken yet."""
        return len(self._pending)

    def _submit(self) -> None:
        while self._pool is not None and self._next < len(self._paths) and self._room():
            path = self._paths[self._next]
            try:
                future = self._pool.submit(read, path)
            except (BrokenProcessPool, RuntimeError):
                self.close()
                return
            self._pending[self._next] = (future, _size(path))
            self._next += 1

    def _room(self) -> bool:
        """Whether another file may be read ahead (see AHEAD_FILES)."""
        held = sum(size for _, size in self._pending.values())
        return not self._pending or (len(self._pending) < AHEAD_FILES and held < AHEAD_BYTES)

    def close(self) -> None:
        """Stop the worker: reads not started are cancelled, the one under way ends."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._pending.clear()

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def read(path: Path) -> Opened | None:
    """In the worker: *path* read and parsed, or None if that failed in any way."""
    try:
        opened = open_recording(path)
    except Exception:  # noqa: BLE001 - the command reads it again and reports the error
        return None
    return opened if opened.travels() else None


def _size(path: Path) -> int:
    """What reading *path* ahead holds, about: a file's size (a folder of events counts
    as 1 MB, which is more than most)."""
    try:
        return path.stat().st_size if path.is_file() else 1024 * 1024
    except OSError:
        return 0


def _start_worker() -> None:
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
