"""Reading a recording: a file or conversation folder is recognised by its content and
parsed (our own session log, another agent's recording, or an evaluation output of
several runs). Which files are recordings is blobviewer.ingest.finding."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blobviewer.ingest.errors import IngestError, NotARecording, NotResumable, PartOfAnother
from blobviewer.ingest.importers import (
    OUR_FORMAT,
    RESUMABLE,
    Recording,
    RecordingError,
    UnknownFormat,
    folder_layout,
    holds_runs,
    load_folder_sessions,
    load_runs,
    load_sessions,
    sniff,
)
from blobviewer.ingest.importers.atif import PartOfRecording
from blobviewer.ingest.importers.json_lines import (
    DEFAULT_MAX_RECORD,
    RecordingText,
    SkippedRecord,
)
from core.agent.session_log import SessionLog, SessionLogError, session_log_from_records
from core.json_values import parse_json


@dataclass(frozen=True)
class Opened:
    """A recording read and recognised: our own log, parsed; another agent's recording;
    or the runs of a file that holds several sessions (an evaluation output's, numbered
    by line; a trajectory and its sub-agents', numbered 0)."""

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
    grows (blobviewer.ingest.unchanged). *resume*: (offset, lines) to go on from after the
    file's first line, or None to read it all; *carry*: what the read that ended there
    carried over (another agent's recording: Recording.carry). After the read: its
    format, the offset and line count after its last whole line (0 for a read that
    cannot be resumed: a format read whole) and its carry."""

    resume: tuple[int, int] | None = None
    carry: dict[str, Any] | None = None
    format: str = ""
    offset: int = 0
    lines: int = 0

    def ended(self, opened: Opened, text: RecordingText) -> None:
        """The read of *text* ended: note where, if a read of the grown file can go on."""
        recording = opened.recording
        self.format = opened.kind
        self.carry = recording.carry if recording is not None else None
        resumable = opened.kind == OUR_FORMAT or (self.carry is not None and not text.taken_torn)
        self.offset, self.lines = text.consumed if resumable else (0, 0)

    def whole(self) -> None:
        """Read the file whole after all (see NotResumable)."""
        self.resume = self.carry = None


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
            return opened_sessions(load_folder_sessions(path))
        resume = state.resume if state is not None else None
        carry = state.carry if state is not None else None
        with RecordingText.open(path, max_record=max_record, resume=resume) as text:
            try:
                opened = _opened(path, text, carry)
            finally:
                if skipped is not None:
                    skipped.extend(text.skipped)
            if state is not None:
                state.ended(opened, text)
            return opened
    except PartOfRecording as error:
        raise PartOfAnother(str(path), error.line, error.message) from None
    except UnknownFormat as error:
        raise NotARecording(str(path), error.line, error.message) from None
    except RecordingError as error:
        raise IngestError(error.path, error.line, error.message) from None
    except SessionLogError as error:
        raise IngestError(str(path), error.line or None, error.message) from None


def _opened(path: Path, text: RecordingText, carry: dict[str, Any] | None) -> Opened:
    kind, document = sniff(path, text)
    if text.resume is not None and kind != OUR_FORMAT and (carry is None or kind not in RESUMABLE):
        raise NotResumable(f"{path}: a {kind} recording is read whole")
    if holds_runs(kind, document):
        return Opened(kind, runs=load_runs(path, text))
    if kind != OUR_FORMAT:
        return opened_sessions(load_sessions(path, text, kind, document, carry))
    return Opened(kind, log=read_our_log(path, text))


def opened_sessions(recordings: list[Recording]) -> Opened:
    """A recording read: one session, or several (a trajectory and its sub-agents')."""
    kind = recordings[0].format
    if len(recordings) == 1:
        return Opened(kind, recording=recordings[0])
    return Opened(kind, runs=[(0, recording) for recording in recordings])


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
