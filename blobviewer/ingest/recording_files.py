"""Which files are recordings, and reading one: a folder is searched for recording-like
names, and a file or conversation folder is recognised by its content and parsed (our own
session log, another agent's recording, or an evaluation output of several runs)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blobviewer.ingest.errors import IngestError, NotARecording
from blobviewer.ingest.importers import (
    OUR_FORMAT,
    Recording,
    RecordingError,
    UnknownFormat,
    folder_layout,
    holds_runs,
    load_folder,
    load_runs,
    load_sniffed,
    sniff,
)
from blobviewer.ingest.importers.json_lines import (
    DEFAULT_MAX_RECORD,
    RecordingText,
    SkippedRecord,
)
from core.agent.session_log import SessionLog, SessionLogError, session_log_from_records
from core.json_values import parse_json

RECORDING_SUFFIXES = (".jsonl", ".json", ".traj")


@dataclass(frozen=True)
class Opened:
    """A recording read and recognised: our own log, parsed; another agent's recording;
    or the runs of a file that holds several."""

    kind: str
    log: SessionLog | None = None
    recording: Recording | None = None
    runs: list[tuple[int, Recording | RecordingError]] | None = None

    @property
    def session(self) -> Recording | SessionLog:
        """The one session of a recording that is not a file of runs."""
        session = self.recording if self.recording is not None else self.log
        if session is None:
            raise ValueError("a file of runs holds a session per run: see runs")
        return session


@dataclass
class ReadState:
    """Where a read of a recording began and ended, for reading only what it adds once it
    grows (blobviewer.ingest.unchanged). *resume*: (offset, lines) to go on from after our
    own log's header line, or None to read it all. After the read: its format, and the
    offset and line count after its last whole line (0 for a format read whole)."""

    resume: tuple[int, int] | None = None
    format: str = ""
    offset: int = 0
    lines: int = 0


def open_recording(
    path: Path,
    *,
    max_record: int = DEFAULT_MAX_RECORD,
    skipped: list[SkippedRecord] | None = None,
    state: ReadState | None = None,
) -> Opened:
    """Read, recognise and parse *path* a record at a time; raises NotARecording or
    IngestError (`path:line: msg`, naming the event file of a conversation folder that is
    damaged). Records over *max_record* bytes are passed over and added to *skipped*
    (blobviewer.ingest.importers.json_lines), whatever the outcome. With *state*, our own
    log is read from its resume point on (its header line first), and *state* says where
    the read ended."""
    try:
        if path.is_dir() and folder_layout(path) is not None:
            recording = load_folder(path)
            return Opened(recording.format, recording=recording)
        resume = state.resume if state is not None else None
        with RecordingText.open(path, max_record=max_record, resume=resume) as text:
            try:
                opened = _opened(path, text)
            finally:
                if skipped is not None:
                    skipped.extend(text.skipped)
            if state is not None and opened.kind == OUR_FORMAT:
                state.format = opened.kind
                state.offset, state.lines = text.consumed
            return opened
    except UnknownFormat as error:
        raise NotARecording(str(path), error.line, error.message) from None
    except RecordingError as error:
        raise IngestError(error.path, error.line, error.message) from None
    except SessionLogError as error:
        raise IngestError(str(path), error.line or None, error.message) from None


def _opened(path: Path, text: RecordingText) -> Opened:
    kind, document = sniff(path, text)
    if holds_runs(kind, document):
        return Opened(kind, runs=load_runs(path, text))
    if kind != OUR_FORMAT:
        return Opened(kind, recording=load_sniffed(path, text, kind, document))
    return Opened(kind, log=read_our_log(path, text))


def read_our_log(path: Path, text: RecordingText) -> SessionLog:
    """Our own session log, a line at a time, read as core's parse_session_log reads one
    (exact numbers; a torn last line after the header left for later; a blank line is
    damage); raises SessionLogError."""
    torn = False

    def records() -> Iterator[tuple[int, Any]]:
        nonlocal torn
        for line in text.lines(parse=_exact_json, keep_blank=True):
            if line.blank:
                raise SessionLogError(path, line.number, "empty line")
            if line.error is not None:
                if line.unterminated and line.number > 1:
                    torn = True  # the recorder is still writing it
                    return
                raise SessionLogError(path, line.number, f"not JSON: {line.error}")
            yield line.number, line.value

    log = session_log_from_records(path, records())
    log.torn_tail = torn
    return log


def _exact_json(raw: bytes) -> tuple[Any, bool]:
    # parse_json, as core reads its own logs: no lossy numbers, no NaN.
    return parse_json(raw), False


class Links:
    """Which symbolic links ingest follows in the folders it searches
    (docs/recording.md#symbolic-links): a link that leads inside the *folders* given (both
    resolved before they are compared) is followed, one that leads out of them only when
    *follow* (`--follow-links`). A link not followed is remembered, to be said once
    (unsaid). Deciding never opens the link's target: links are read, not followed
    (readlink and lstat, as Path.resolve does). A path named on the command line is not
    judged here: the user named it."""

    def __init__(self, folders: Iterable[Path], *, follow: bool = False) -> None:
        self.follow = follow
        self._roots = [folder.resolve() for folder in folders if folder.is_dir()]
        self._passed_over: dict[Path, Path] = {}  # link -> where it leads
        self._said: set[Path] = set()

    def inside(self, target: Path) -> bool:
        """Whether *target* (a resolved path) is one of the folders or in one."""
        return any(target == root or root in target.parents for root in self._roots)

    def allows(self, path: Path) -> bool:
        """Whether *path*, found in a folder searched or watched, may be read: it leads
        inside the folders, or links are followed. One that leads out is remembered with
        the link it goes through (itself, or the linked folder it is in), to be said when
        that link could be a recording or hold some (a folder, or a recording's name)."""
        if self.follow:
            return True
        target = path.resolve()
        if self.inside(target):
            return True
        link = next((part for part in (path, *path.parents) if part.is_symlink()), path)
        if link.suffix in RECORDING_SUFFIXES or link.is_dir():
            self._passed_over.setdefault(link, link.resolve())
        return False

    def unsaid_any(self) -> bool:
        """Whether a link not followed has yet to be said."""
        return not self._said.issuperset(self._passed_over)

    def unsaid(self) -> list[str]:
        """A line for each link not followed that has not been said yet."""
        lines = []
        for link, target in self._passed_over.items():
            if link not in self._said:
                self._said.add(link)
                lines.append(
                    f"{link}: a link to {target}, outside the folders given; not followed "
                    "(--follow-links follows it)"
                )
        return lines


def recording_paths(
    paths: Iterable[Path], *, links: Links | None = None
) -> list[tuple[Path, bool]]:
    """(path, named) pairs: files as given (named), and the files of folders, searched
    recursively for recording-like names, in name order. Hidden entries and blob stores
    (folders named `blobs`, whose `.json` files are blobs, not recordings) are passed over.
    A conversation folder (OpenHands: see blobviewer.ingest.importers.folder_layout) is one
    recording, given or found, and the files inside it are not searched. A symbolic link
    found in a folder is followed as *links* says (default: only inside *paths*).
    """
    paths = list(paths)
    links = Links(paths) if links is None else links
    found: list[tuple[Path, bool]] = []
    for path in paths:
        if not path.is_dir() or folder_layout(path) is not None:
            found.append((path, True))
            continue
        candidates = _search(path, links)
        # Recognised by what is in them (an events/ folder and its first event or state).
        folders = {c.parent for c in candidates if c.name == "events" and folder_layout(c.parent)}
        for candidate in candidates:
            if folders and not folders.isdisjoint(candidate.parents):
                continue  # inside a conversation folder: part of that recording
            if never_a_recording(candidate.relative_to(path).parts):
                continue
            # Only a link can lead out: the search enters no linked folder unless told to.
            if candidate.is_symlink() and not links.allows(candidate):
                continue
            if candidate in folders or (
                candidate.suffix in RECORDING_SUFFIXES and candidate.is_file()
            ):
                found.append((candidate, False))
    return found


def _search(folder: Path, links: Links) -> list[Path]:
    """Every file and folder under *folder*, in name order, as `rglob("*")` lists them:
    a linked folder is listed but not entered, unless links are followed and it leads out
    of the folders given (then once, however many links lead to it)."""
    found: list[Path] = []
    pending = [folder]
    entered = {folder.resolve()}
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue  # unreadable: searched as far as it can be, as rglob does
        for entry in entries:
            path = current / entry.name
            found.append(path)
            try:
                if not entry.is_dir():
                    continue
                if not entry.is_symlink():
                    pending.append(path)
                    continue
            except OSError:
                continue
            target = path.resolve() if links.follow else None
            if target is not None and not links.inside(target) and target not in entered:
                entered.add(target)
                pending.append(path)
    return sorted(found)


def never_a_recording(parts: tuple[str, ...]) -> bool:
    """Whether a path found in a folder (*parts*, relative to it) is passed over: hidden,
    or in a hidden folder or a blob store (`blobs/`, whose `.json` files are blobs)."""
    *folders, name = parts
    return name.startswith(".") or any(part.startswith(".") or part == "blobs" for part in folders)
