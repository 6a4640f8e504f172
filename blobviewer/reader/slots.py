"""A server-wide limit on expensive selector evaluations.

An evaluation is *expensive* when its selector has a `grep:` step (it reads every line of
what it searches) or when its blob is bigger than BLOBVIEWER_EXPENSIVE_BYTES (any
selector may load it whole). At most BLOBVIEWER_EXPENSIVE_CONCURRENCY of them run at
once across the whole server, whatever the number of worker processes and threads: each
one holds one of that many lock files, `<data>/locks/expensive-<n>.lock`, with an
exclusive `flock`. Another waits up to BLOBVIEWER_EXPENSIVE_WAIT_SECONDS, trying the
slots again every POLL_SECONDS, and then gets :class:`Busy` (the views answer 429).

`flock` locks belong to an open file, so two threads of one process exclude each other
as two processes do, and the kernel releases a lock when its holder exits, even by
`kill -9`: a crash never leaves a slot taken. The lock files must not be deleted while
the site runs (a new file would be a new, free lock); they are empty and need no backup.

The limit is per host: the lock files stay in the local data directory even when blobs
and session logs are in an object store (BLOBVIEWER_BLOBS), since a limit shared across
hosts would need a lock service and each host's CPU and memory are its own anyway. Two
hosts on one bucket may each run BLOBVIEWER_EXPENSIVE_CONCURRENCY evaluations.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from blobviewer.data_dir import data_dir
from core.selectors import Grep, Selector, SelectorError, parse_selector
from core.store import BlobStore
from core.store.blob_id import BlobId
from core.store.errors import BlobStoreError, StoreUnavailable

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.05
# The wait between tries; a test replaces it to free a slot at a known moment.
_sleep = time.sleep


class Busy(Exception):
    """Every slot stayed taken for the whole wait; the message is one line for the user."""


def is_expensive(selector: Selector | str | None, size: int) -> bool:
    """Whether evaluating *selector* on a blob of *size* bytes needs a slot. A selector
    given as text that does not parse has no steps (its evaluation is only an error)."""
    if size > settings.BLOBVIEWER_EXPENSIVE_BYTES:
        return True
    if not isinstance(selector, Selector):
        try:
            selector = parse_selector(selector)
        except SelectorError:
            return False
    return any(isinstance(step, Grep) for step in selector.steps)


@contextmanager
def evaluation_slot(selector: Selector | str | None, size: int) -> Iterator[None]:
    """Run the body at once when the evaluation is cheap; otherwise holding a slot, which
    is freed when the body ends however it ends. Raises Busy when no slot frees in time."""
    if not is_expensive(selector, size):
        yield
        return
    fd = _take_slot()
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the open file releases its flock


def busy_message() -> str:
    """What a request that found no free slot is told, in one line."""
    return (
        "the server is busy with other expensive selectors (grep:, or any selector on a "
        f"blob over {_size_label(settings.BLOBVIEWER_EXPENSIVE_BYTES)}); try again in a moment"
    )


def _size_label(size: int) -> str:
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:.4g} {unit}"
    return f"{size} bytes"


def _take_slot() -> int | None:
    """The descriptor of a slot's lock file, locked; None when the lock files cannot be
    made at all (the evaluation then goes on unlimited, with a warning in the log: a
    misconfigured data folder must not take the blob pages down)."""
    slots = max(1, settings.BLOBVIEWER_EXPENSIVE_CONCURRENCY)
    deadline = time.monotonic() + max(0.0, float(settings.BLOBVIEWER_EXPENSIVE_WAIT_SECONDS))
    try:
        folder = data_dir() / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        paths = [folder / f"expensive-{n}.lock" for n in range(slots)]
        while True:
            for path in paths:
                if (fd := _try_lock(path)) is not None:
                    return fd
            if time.monotonic() >= deadline:
                raise Busy(busy_message())
            _sleep(POLL_SECONDS)
    except OSError as error:
        logger.warning("expensive selectors are not limited: %s", error)
        return None


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def stored_size(store: BlobStore, blob_id: BlobId) -> int:
    """The size of the blob; 0 when it cannot be found (the evaluation then fails on its
    own, quickly)."""
    try:
        return store.size_sync(blob_id)
    except StoreUnavailable:
        raise
    except (BlobStoreError, OSError):
        return 0
