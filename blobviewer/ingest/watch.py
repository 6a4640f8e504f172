"""Following recordings as agents write them (`manage.py ingest --watch`).

The file system tells us what changed (watchfiles: inotify and its kin, with watchfiles'
own fallback to polling where the system cannot notify); this module turns those changes
into the recordings to ingest again, and runs the loop until asked to stop.

What makes it safe to ingest a recording while its agent is still writing it is ingest's
own behaviour, not anything here: ingest is idempotent and incremental (a grown file adds
only its new items), every JSON Lines importer leaves a torn last line out until it is
complete, and a whole document caught half-written does not parse, so it is reported and
ingested again on its next change. So the rule here is simple: whenever a recording
changes, ingest it again; a file whose last ingest failed is never marked as done.

Folders are watched recursively; a file given by name is watched through its folder (not
recursively), so an agent that replaces the file (writes a new one and renames it over
the old) is still followed; a file named through a symbolic link, through the folder of
what it leads to as well. The file system's notifications enter linked folders too: a
change there is ingested only as blobviewer.ingest.finding.Links allows (a link
that leads out of the folders given is not followed unless `--follow-links`).
"""

from __future__ import annotations

import queue
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import watchfiles

from blobviewer.ingest.finding import (
    RECORDING_SUFFIXES,
    Links,
    never_a_recording,
    recording_paths,
)
from blobviewer.ingest.importers import folder_layout

# watchfiles yields a batch once no change came for STEP_MS, or after DEBOUNCE_MS of
# changes that keep coming (an agent appending a line every few milliseconds): a busy
# recording is ingested again about once a second, not once a line.
DEBOUNCE_MS = 1_000
STEP_MS = 100
# How long watchfiles waits before it yields an empty batch: the first one tells us the
# watcher is running, so nothing written after that is missed (see follow).
READY_MS = 200


class WatchError(Exception):
    """The file system could not be watched; str() is one line."""


@dataclass(frozen=True)
class WatchRoot:
    """A PATH to follow: as the user gave it (what output shows) and as an absolute path
    (what watchfiles reports changes under)."""

    given: Path
    absolute: Path
    is_file: bool
    conversation: bool  # the PATH is itself one conversation folder (see folder_layout)
    target: Path | None = None  # a file named through a link: what it leads to

    @classmethod
    def of(cls, path: Path) -> WatchRoot:
        conversation = path.is_dir() and folder_layout(path) is not None
        is_file = not path.is_dir()
        target = path.resolve() if is_file and path.is_symlink() else None
        return cls(path, path.absolute(), is_file, conversation, target)

    def shown(self, absolute: Path) -> Path:
        """*absolute* (a path under this root) the way the user named the root."""
        if absolute == self.absolute:
            return self.given
        return self.given / absolute.relative_to(self.absolute)


def recordings_changed(
    changed: Iterable[Path], roots: Sequence[WatchRoot], links: Links | None = None
) -> list[tuple[Path, bool]]:
    """The recordings that *changed* (absolute paths watchfiles reported) belong to, as
    `(path, named)` pairs like recording_paths gives (named: a PATH the user gave itself),
    in path order, each once; deleted files are left out.

    A change is mapped the way recording_paths searches a folder: a file with a recording's
    suffix, or the conversation folder (blobviewer.ingest.importers.folder_layout) it is inside;
    hidden files and folders and blob stores (`blobs/`) are passed over; a folder that
    appeared is searched, as its first files may have come before it was watched. A
    recording found in a folder is left out when *links* does not allow it (default: one
    that leads out of the roots' folders).
    """
    if links is None:
        links = Links(root.given for root in roots)
    found: dict[Path, bool] = {}
    for path in changed:
        for root in roots:
            for recording, named in _recordings_under(path, root, links):
                if named or links.allows(recording):
                    found[recording] = found.get(recording, False) or named
    return sorted(found.items())


def _recordings_under(path: Path, root: WatchRoot, links: Links) -> list[tuple[Path, bool]]:
    if root.is_file:
        named = path == root.absolute or (root.target is not None and path == root.target)
        return [(root.given, True)] if named and path.is_file() else []
    if path != root.absolute and root.absolute not in path.parents:
        return []
    if root.conversation:
        return [(root.given, True)]
    if path == root.absolute:
        return []
    if never_a_recording(path.relative_to(root.absolute).parts):
        return []
    if not links.allows(path):  # before anything of it is read, even a folder's listing
        return []
    # Inside a conversation folder: the folder is the recording.
    for folder in path.parents:
        if folder == root.absolute:
            break
        if folder_layout(folder) is not None:
            return [(root.shown(folder), False)]
    if path.is_dir():
        if folder_layout(path) is not None:
            return [(root.shown(path), False)]
        return [(root.shown(found), False) for found, _ in recording_paths([path], links=links)]
    if path.suffix in RECORDING_SUFFIXES and path.is_file():
        return [(root.shown(path), False)]
    return []


def follow(
    roots: Sequence[WatchRoot],
    *,
    stop: threading.Event,
    on_ready: Callable[[], None],
    on_changes: Callable[[list[tuple[Path, bool]]], None],
    debounce_ms: int = DEBOUNCE_MS,
    step_ms: int = STEP_MS,
    links: Links | None = None,
) -> None:
    """Watch *roots* until *stop* is set: once the watchers run, call `on_ready()` (the
    first ingest of what is there: changes made while it runs are kept, not lost), then
    `on_changes(recordings)` with each batch of changed recordings (recordings_changed,
    as *links* allows).
    Raises WatchError when a folder cannot be watched. Returns once *stop* is set; the
    callbacks should check it too, to stop between files.
    """
    folders = [root.absolute for root in roots if not root.is_file]
    # A file is watched through its folder, so a file replaced by a rename is still seen.
    named = [root.absolute for root in roots if root.is_file]
    named += [root.target for root in roots if root.target is not None]
    parents = sorted({file.parent for file in named})
    batches: queue.Queue[list[Path] | BaseException] = queue.Queue()
    watchers = []
    for paths, recursive in ((folders, True), (parents, False)):
        if paths:
            ready = threading.Event()
            thread = threading.Thread(
                target=_watch,
                args=(paths, recursive, batches, ready, stop, debounce_ms, step_ms),
                name="ingest-watch",
                daemon=True,
            )
            thread.start()
            watchers.append((thread, ready))
    try:
        for _, ready in watchers:
            while not ready.wait(0.1):
                if stop.is_set():
                    return
        _raise_failure(batches)
        on_ready()
        while not stop.is_set():
            try:
                batch = batches.get(timeout=0.2)
            except queue.Empty:
                continue
            changed = _drain(batch, batches)
            recordings = recordings_changed(changed, roots, links)
            # A batch of links only is still a batch: on_changes says them.
            if (recordings or (links is not None and links.unsaid_any())) and not stop.is_set():
                on_changes(recordings)
    finally:
        stop.set()
        for thread, _ in watchers:
            thread.join(timeout=5)


def _drain(first: list[Path] | BaseException, batches: queue.Queue) -> list[Path]:
    """*first* and every batch already waiting, as one list; raises a watcher's failure."""
    items = [first]
    while True:
        try:
            items.append(batches.get_nowait())
        except queue.Empty:
            break
    changed: list[Path] = []
    for item in items:
        if isinstance(item, BaseException):
            raise WatchError(f"cannot watch for changes: {type(item).__name__}: {item}")
        changed.extend(item)
    return changed


def _raise_failure(batches: queue.Queue) -> None:
    """Raise the failure of a watcher that could not start (it is queued first)."""
    try:
        item = batches.get_nowait()
    except queue.Empty:
        return
    if isinstance(item, BaseException):
        raise WatchError(f"cannot watch for changes: {type(item).__name__}: {item}")
    batches.put(item)


def _watch(
    paths: list[Path],
    recursive: bool,
    batches: queue.Queue,
    ready: threading.Event,
    stop: threading.Event,
    debounce_ms: int,
    step_ms: int,
) -> None:
    try:
        for changes in watchfiles.watch(
            *paths,
            watch_filter=None,  # recordings_changed decides, as recording_paths would
            debounce=debounce_ms,
            step=step_ms,
            stop_event=stop,
            rust_timeout=READY_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
            recursive=recursive,
        ):
            ready.set()
            if changes:
                batches.put([Path(changed) for _, changed in changes])
    except BaseException as error:  # noqa: BLE001 - handed to the main thread to report
        batches.put(error)
    finally:
        ready.set()


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """While in the block, SIGTERM and Ctrl-C (SIGINT) set *stop*, so the file being
    ingested is finished and the run ends with its summary; a second Ctrl-C interrupts at
    once. Only the main thread can handle signals: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(number: int, frame: FrameType | None) -> None:
        if number == signal.SIGINT and stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {
        number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
