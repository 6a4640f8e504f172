"""Which files are recordings, and reading one: a folder is searched for recording-like
names, and a file or conversation folder is recognised by its content and parsed (our own
session log, another agent's recording, or an evaluation output of several runs)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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
    read_bytes,
    sniff,
)
from core.agent.session_log import SessionLog, SessionLogError, parse_session_log

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


def open_recording(path: Path) -> Opened:
    """Read, recognise and parse *path*; raises NotARecording or IngestError
    (`path:line: msg`, naming the event file of a conversation folder that is damaged)."""
    try:
        if path.is_dir() and folder_layout(path) is not None:
            recording = load_folder(path)
            return Opened(recording.format, recording=recording)
        data = read_bytes(path)
        kind, document = sniff(path, data)
        if holds_runs(kind, document):
            return Opened(kind, runs=load_runs(path, data))
        if kind != OUR_FORMAT:
            return Opened(kind, recording=load_sniffed(path, data, kind, document))
        return Opened(kind, log=parse_session_log(data, path))
    except UnknownFormat as error:
        raise NotARecording(str(path), error.line, error.message) from None
    except RecordingError as error:
        raise IngestError(error.path, error.line, error.message) from None
    except SessionLogError as error:
        raise IngestError(str(path), error.line or None, error.message) from None


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
