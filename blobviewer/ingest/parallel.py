"""Ingesting several recordings at once, in worker processes (`manage.py ingest --jobs`).

One process ingests a file at a time: while it waits for the database, or creates blob
files, nothing else moves. On PostgreSQL, `manage.py ingest` hands whole files to worker
processes instead, each with a connection of its own and a transaction per file, as the
command would have run them (bench/ingest_bench.py measures the difference). The outcomes
come back in the order of the files, so the command reports them exactly as it would one
by one. Two files of one session may be ingested at the same moment: the one that
commits second finds its rows taken and plans again (see ingest.ingest_session).

SQLite takes one writer at a time, and so does a caller's transaction (a test's): both
ingest in the command's own process. A worker that dies (killed, out of memory) leaves
its files to the command, which ingests them itself: ingesting a file again adds only
what it does not have yet.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import pickle
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from django.db import connection, connections

from blobviewer.ingest.sessions import IngestError

MAX_JOBS = 8
AHEAD = 2  # files queued for each worker beyond the one it is ingesting
_FORK = "fork"  # workers start with the settings and code this process has (not on Windows)

Outcomes = list[tuple[str, Any]]  # (label, IngestResult or an exception), as ingest_recordings
T = TypeVar("T")


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_jobs() -> int:
    """Worker processes for an ingest when --jobs is not given: one per core (at most
    four) on PostgreSQL, none (the command's own process) on SQLite."""
    if connection.vendor != "postgresql":
        return 1
    return max(1, min(4, cores()))


def unavailable(jobs: int) -> str:
    """Why *jobs* worker processes cannot ingest here ("" when they can)."""
    if jobs <= 1:
        return ""
    if connection.vendor != "postgresql":
        return "SQLite takes one writer at a time: --jobs needs PostgreSQL"
    if _FORK not in multiprocessing.get_all_start_methods():
        return "worker processes need fork(), which this platform does not have"
    return ""


def in_workers(jobs: int) -> bool:
    """Whether ingest_in_workers runs items in *jobs* worker processes (not inside a
    transaction, whose rows the workers' connections could not see)."""
    return jobs > 1 and not connection.in_atomic_block


def ingest_in_workers(
    items: Sequence[T],
    work: Callable[[T], Outcomes],
    *,
    jobs: int,
    stop: threading.Event,
    here: Callable[[T], Outcomes] | None = None,
) -> Iterator[tuple[T, Outcomes]]:
    """`(item, work(item))` for each of *items*, in their order, *work* run in *jobs*
    worker processes forked from this one (so *work* is this process's code and data; it
    opens what it writes to, a store or a connection, in the worker). Once *stop* is set
    nothing more starts; what is under way is finished and yielded. Inside a transaction,
    or with one job, *here* (default: *work*) runs each item in this process, and a
    worker that dies leaves the items not yet yielded to it."""
    global _work
    here = here or work
    if not in_workers(jobs):
        for item in items:
            if stop.is_set():
                return
            yield item, here(item)
        return
    # The workers open connections of their own: none of ours may be shared with them
    # (a child that closed an inherited one would end this process's session too).
    connections.close_all()
    _work = work  # the workers are forked at the first submit, and find it there
    pending: dict[int, Future[Outcomes]] = {}
    submitted = 0
    pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context(_FORK),
        initializer=_start_worker,
    )
    try:
        for index, item in enumerate(items):
            if stop.is_set():
                # Latest first: the pool starts the earliest item not cancelled, so an
                # item is never started once one before it was cancelled.
                for later in sorted(pending, reverse=True):
                    if pending[later].cancel():
                        del pending[later]
            while pool is not None and not stop.is_set() and submitted < len(items):
                if submitted >= index + jobs * (1 + AHEAD):
                    break
                pending[submitted] = pool.submit(_call, items[submitted])
                submitted += 1
            future = pending.pop(index, None)
            if future is None:  # cancelled (stopped), or the pool is gone
                if pool is None and not stop.is_set():
                    yield item, here(item)
                    continue
                return
            try:
                outcomes = future.result()
            except BrokenProcessPool:  # a worker died: what is left is ingested here
                pool.shutdown(wait=True, cancel_futures=True)  # type: ignore[union-attr]
                pool = None
                pending.clear()
                outcomes = here(item)
            yield item, outcomes
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        _work = None


_work: Callable[[Any], Outcomes] | None = None  # in a worker: what ingest_in_workers runs


def _call(item: Any) -> Outcomes:
    """In a worker: *_work(item)*, its exceptions made fit to travel back."""
    assert _work is not None  # set before the worker was forked
    try:
        outcomes = _work(item)
    except Exception as error:  # noqa: BLE001 - reported as the command reports any error
        outcomes = [("", error)]
    return [(label, _travelling(outcome, item)) for label, outcome in outcomes]


def _travelling(outcome: Any, item: Any) -> Any:
    """*outcome*, or for an exception that cannot be pickled, an IngestError that the
    command reports in the same words as the exception itself."""
    if not isinstance(outcome, BaseException) or isinstance(outcome, IngestError):
        return outcome
    try:
        pickle.loads(pickle.dumps(outcome))
    except Exception:  # noqa: BLE001 - any exception may fail to pickle in its own way
        path = str(item[0] if isinstance(item, tuple) else item)
        message = f"could not be ingested: {type(outcome).__name__}: {outcome}"
        return IngestError(path, None, message)
    return outcome


def _start_worker() -> None:
    # Ctrl-C reaches the whole process group: the command decides when to stop (after
    # the files under way), so workers ignore it; SIGTERM ends one as any other process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # A worker that is done says goodbye to the database rather than just vanishing.
    multiprocessing.util.Finalize(None, connections.close_all, exitpriority=10)
