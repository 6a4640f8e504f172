"""Recognise a recording's format by its content, never by its file name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blobviewer.ingest.importers import (
    atif,
    claude_code,
    codex,
    gemini,
    harbor,
    openai_chat,
    openhands,
    openhands_v1,
    otlp,
    swe_agent,
)
from blobviewer.ingest.importers.json_lines import RecordingText, RecordTooLarge
from blobviewer.ingest.importers.recording import (
    Recording,
    RecordingError,
    UnknownFormat,
    session_uuid,
    stable_session_id,
)
from core.agent.history import ITEM_TYPES

OUR_FORMAT = "blobviewer"
# What ingest derives from our own session logs; bump it when that changes.
OUR_IMPORTER_VERSION = 1

# Each importer module has FORMAT and IMPORTER_VERSION; a new importer is added here.
IMPORTERS = {
    module.FORMAT: module
    for module in (claude_code, openai_chat, swe_agent, codex, gemini, openhands, atif, otlp)
}


def importer_version(format: str) -> int:
    """The current importer version for *format* (read at call time, so a bump, or a
    test's monkeypatch of a module's IMPORTER_VERSION, takes effect at once). Formats no
    importer reads (records handed to ingest directly) count as version 1."""
    if format == OUR_FORMAT:
        return OUR_IMPORTER_VERSION
    module = IMPORTERS.get(format)
    return int(getattr(module, "IMPORTER_VERSION", 1)) if module is not None else 1


def sniff(path: Path, data: bytes | RecordingText) -> tuple[str, Any]:
    """The format (`blobviewer`, or an importer's FORMAT: see IMPORTERS) and, for the
    formats that are one JSON document, the parsed document (else None), so that nothing
    parses the file twice. An OpenHands evaluation output (one run a line, each its own
    session: see :func:`holds_runs`) is `openhands` with None. *data* is the file's bytes,
    or the file being read (a RecordingText, whose first line is kept for the importer).
    Raises UnknownFormat."""
    text = RecordingText.of(path, data)
    line = text.first()
    if line is None:
        if text.skipped:
            raise UnknownFormat(path, None, "nothing to read: every record is over --max-record")
        raise UnknownFormat(path, None, "empty file")
    first = line.value if line.error is None else None
    if isinstance(first, dict) and (
        (first.get("type") == "session" and "id" in first)
        or (first.get("type") in ITEM_TYPES and "seq" in first)  # a log that lost its header
    ):
        return OUR_FORMAT, None
    if otlp.looks_like(first):  # what the OTLP receiver keeps of a conversation
        return otlp.FORMAT, None
    if claude_code.looks_like(first):
        return claude_code.FORMAT, None
    if codex.looks_like(first):
        return codex.FORMAT, None
    if gemini.looks_like_first(first):  # JSON Lines; a document on one line reads the same
        return gemini.FORMAT, None
    if openhands.looks_like_run(first) or (
        line.error is not None and openhands.looks_like_damaged_run(line.head)
    ):
        return openhands.FORMAT, None
    try:
        document = text.document()
    except RecordTooLarge as error:
        raise UnknownFormat(path, None, str(error)) from None
    except (ValueError, RecursionError):
        if first is not None:
            raise UnknownFormat(path, 1, "JSON Lines of an unknown kind of recording") from None
        raise UnknownFormat(path, None, "not a recording: neither JSON nor JSON Lines") from None
    if atif.looks_like(document):
        return atif.FORMAT, document
    if swe_agent.looks_like(document):
        return swe_agent.FORMAT, document
    if openhands.looks_like_events(document):
        return openhands.FORMAT, document
    if gemini.looks_like(document):
        return gemini.FORMAT, document
    if openai_chat.looks_like(document):
        return openai_chat.FORMAT, document
    raise UnknownFormat(
        path,
        None,
        "unknown recording format (expected a blobviewer session log, Claude Code JSONL, "
        "a Codex rollout, a Gemini CLI session, OpenHands events or evaluation output, "
        "OpenAI chat messages, a SWE-agent trajectory or an ATIF trajectory)",
    )


def detect(path: Path, data: bytes) -> str:
    return sniff(path, data)[0]


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise RecordingError(path, None, f"cannot read: {error.strerror}") from None


def load_recording(path: Path, data: bytes | None = None) -> Recording:
    """Read another agent's recording (*data* if already read), or a conversation folder
    (see :func:`folder_layout`); raises RecordingError naming the file (and line). A file
    is read a record at a time (blobviewer.ingest.importers.json_lines)."""
    if data is None and folder_layout(path) is not None:
        return load_folder(path)
    if data is not None:
        kind, document = sniff(path, data)
        return load_sniffed(path, data, kind, document)
    with RecordingText.open(path) as text:
        kind, document = sniff(path, text)
        return load_sniffed(path, text, kind, document)


# The formats whose read of a grown file can go on from where the last one ended, with
# the Recording.carry it left (a read of our own log needs none): their importers.
RESUMABLE = {claude_code.FORMAT: claude_code, codex.FORMAT: codex}


def load_sniffed(
    path: Path,
    data: bytes | RecordingText,
    kind: str,
    document: Any,
    carry: dict[str, Any] | None = None,
) -> Recording:
    """The recording of a file whose format :func:`sniff` found (of an ATIF trajectory,
    its main session: :func:`load_sessions` gives its sub-agents' too). *carry*: see
    RESUMABLE."""
    if kind == atif.FORMAT:
        return atif.load(path, document)[0]
    if kind in RESUMABLE:
        return RESUMABLE[kind].load(path, data, carry)
    if kind == otlp.FORMAT:
        return otlp.load(path)
    if kind == swe_agent.FORMAT:
        return swe_agent.load(path, document)
    if kind == openai_chat.FORMAT:
        return openai_chat.load(path, document)
    if kind == gemini.FORMAT:
        return gemini.load(path, data, document)
    if kind == openhands.FORMAT and document is not None:
        return openhands.load_events(path, document)
    if holds_runs(kind, document):
        message = "an OpenHands evaluation output holds one session per run: read it with load_runs"
        raise RecordingError(path, None, message)
    raise RecordingError(path, None, "a blobviewer session log: read it with read_session_log")


def load_sessions(
    path: Path,
    data: bytes | RecordingText,
    kind: str,
    document: Any,
    carry: dict[str, Any] | None = None,
) -> list[Recording]:
    """Every session a file whose format :func:`sniff` found holds: its recording, and for
    an ATIF trajectory its sub-agents' after it (each naming it as its parent)."""
    if kind == atif.FORMAT:
        return atif.load(path, document)
    return [load_sniffed(path, data, kind, document, carry)]


def holds_runs(kind: str, document: Any) -> bool:
    """Whether a file :func:`sniff` recognised holds several recordings, one a line (an
    OpenHands evaluation output): read with :func:`load_runs`, not load_sniffed."""
    return kind == openhands.FORMAT and document is None


def load_runs(
    path: Path, data: bytes | RecordingText
) -> list[tuple[int, Recording | RecordingError]]:
    """Each run of an evaluation output with its line number: its recording, or the
    RecordingError (naming `path:line`) that skips that run only."""
    return openhands.load_evaluation_runs(path, data)


# The file or folder, inside a folder that is one recording, that tells it is one: a
# search for recordings finds that, and takes its folder (blobviewer.ingest.finding).
FOLDER_MARKERS = ("events", "agent")


def folder_layout(path: Path) -> str | None:
    """The layout of a folder that is one recording (an OpenHands conversation folder:
    `v0` or `v1`; a Harbor trial: `harbor`), else None (a plain folder, searched for
    recordings)."""
    if harbor.is_trial(path):
        return "harbor"
    return openhands.conversation_layout(path)


def load_folder(path: Path) -> Recording:
    """The recording a folder that is one holds (see :func:`folder_layout`; of a Harbor
    trial, its main session); raises RecordingError. An event file that does not parse is
    reported by its path, unless it is the last one (still being written: left for the
    next read)."""
    return load_folder_sessions(path)[0]


def load_folder_sessions(path: Path) -> list[Recording]:
    """Every session a folder that is one recording holds: load_folder's, and a Harbor
    trial's sub-agents after it."""
    layout = folder_layout(path)
    if layout == "harbor":
        return _load_trial(path)
    if layout == "v1":
        return [openhands_v1.load_v1_folder(path)]
    if layout == "v0":
        return [openhands.load_v0_folder(path)]
    raise RecordingError(path, None, "not an OpenHands conversation folder or Harbor trial")


def _load_trial(path: Path) -> list[Recording]:
    """A Harbor trial's sessions: its agent's own log where it kept one (richer than its
    ATIF conversion), else its `agent/trajectory.json` and sub-agents; the trial's facts
    (job, task, reward, outcome) on the main one."""
    facts = harbor.trial_facts(path)
    recordings: list[Recording] | None = None
    for log in harbor.native_logs(path):
        try:
            with RecordingText.open(log) as text:
                kind, _ = sniff(log, text)
        except (OSError, RecordingError):
            continue
        if kind in RESUMABLE:
            recordings = [load_recording(log)]
            break
    if recordings is None:
        trajectory = harbor.trajectory_path(path)
        if not trajectory.is_file():
            raise RecordingError(path, None, "a Harbor trial with no agent/trajectory.json or log")
        with RecordingText.open(trajectory) as text:
            kind, document = sniff(trajectory, text)
        if kind != atif.FORMAT:
            raise RecordingError(trajectory, None, "not an ATIF trajectory")
        # The trial's own id; else its job and name with the trajectory's opening (two
        # trials may hold the same trajectory: each is a run of its own).
        if facts["trial_id"]:
            session_id = session_uuid(atif.FORMAT, facts["trial_id"])
        else:
            trial = [facts["job"], facts["meta"]["harbor_trial"], atif.opening(document)]
            session_id = stable_session_id("harbor", trial)
        recordings = atif.load_trajectory(trajectory, document, session_id=session_id)
    harbor.with_trial_facts(recordings[0], facts)
    return recordings
