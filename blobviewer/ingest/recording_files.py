"""Which files are recordings, and reading one: a folder is searched for recording-like
names, and a file or conversation folder is recognised by its content and parsed (our own
session log, another agent's recording, or an evaluation output of several runs)."""

from __future__ import annotations

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


def open_recording(
    path: Path,
    *,
    max_record: int = DEFAULT_MAX_RECORD,
    skipped: list[SkippedRecord] | None = None,
) -> Opened:
    """Read, recognise and parse *path* a record at a time; raises NotARecording or
    IngestError (`path:line: msg`, naming the event file of a conversation folder that is
    damaged). Records over *max_record* bytes are passed over and added to *skipped*
    (blobviewer.ingest.importers.json_lines), whatever the outcome."""
    try:
        if path.is_dir() and folder_layout(path) is not None:
            recording = load_folder(path)
            return Opened(recording.format, recording=recording)
        with RecordingText.open(path, max_record=max_record) as text:
            try:
                return _opened(path, text)
            finally:
                if skipped is not None:
                    skipped.extend(text.skipped)
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
