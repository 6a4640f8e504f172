"""What `manage.py ingest` keeps of each recording in an object store, and how
`ingest --rebuild` gets it back on a host that does not have the file.

With BLOBVIEWER_BLOBS on an object store, a session ingested from a file on one host must
be re-derivable from any host: nothing only one host has (docs/object-storage.md#kept-recordings).
After each session is ingested, the bytes it was derived from are kept as
`<prefix>/sessions/<id>/<format>.recording` (blobviewer.catalog.session_logs.KeptRecordings),
with the recording's own name:

- a file: its bytes as read (a Claude Code JSONL, a trajectory, our own session log);
- an OpenHands evaluation output (one run a line, each its own session): that run's line
  only, so a file of 500 runs is kept once in all, not 500 times;
- a trajectory with its sub-agents: the file, for each of its sessions;
- an OpenHands conversation folder or a Harbor trial: an uncompressed tar of the
  folder's regular files and folders (symbolic links are left out: they could name
  anything on the host), written with fixed times and owners so that the same folder
  makes the same bytes.

A copy is replaced only when its bytes changed and the ingest added or re-derived items:
an older copy of a recording (on another host, or restored from a backup) that adds
nothing never replaces the one the session's items came from. An unchanged recording
costs one HEAD. The session keeps the path it was ingested from (`source_path`): a
rebuild reads that path when this host has it, else the kept copy (fetch_copy), else,
for a session uploaded through the API, the log the upload kept.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from blobviewer.catalog.session_logs import KeptRecordings, RecordingCopy, session_logs
from blobviewer.ingest.errors import IngestError
from blobviewer.ingest.folder_tars import folder_tar, unpack_folder
from blobviewer.ingest.importers import OUR_FORMAT
from blobviewer.ingest.recording_files import Opened
from blobviewer.ingest.sessions import IngestResult
from core.store.errors import BlobStoreError


def keep_copies(
    copies: KeptRecordings, path: Path, opened: Opened, results: Iterable[IngestResult]
) -> list[str]:
    """Keep the recording of each session in *results* (ingested from *path*, as
    *opened* read it); the locations of the copies written (unchanged ones are not).
    Raises OSError (the file) or BlobStoreError (the store)."""
    results = list(results)
    if not results:
        return []
    written = []
    if opened.runs is not None and any(number for number, _ in opened.runs):
        lines = path.read_bytes().split(b"\n")  # load_runs numbers the lines the same way
        numbers = {
            str(run.header["id"]): number
            for number, run in opened.runs
            if not isinstance(run, Exception)
        }
        for result in results:
            number = numbers.get(str(result.session_id))
            if number is None or number > len(lines):
                continue
            data = lines[number - 1] + b"\n"
            if _keep(copies, result, opened.kind, data, name=path.name, layout="file"):
                written.append(copies.location(result.session_id, opened.kind))
        return written
    source_format = OUR_FORMAT if opened.log is not None else opened.kind
    if path.is_dir():
        data, layout = folder_tar(path), "folder"
    else:
        data, layout = path.read_bytes(), "file"
    for result in results:
        if _keep(copies, result, source_format, data, name=path.name, layout=layout):
            written.append(copies.location(result.session_id, source_format))
    return written


def kept_outcomes(
    copies: KeptRecordings, path: Path, opened: Opened, outcomes: list[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """keep_copies of the sessions *outcomes* (ingest_recordings') say were ingested;
    a copy that cannot be kept turns the sessions' outcomes into errors (ingested, but
    not re-derivable from another host)."""
    results = [outcome for _, outcome in outcomes if isinstance(outcome, IngestResult)]
    try:
        keep_copies(copies, path, opened, results)
    except (OSError, BlobStoreError) as error:
        failed = IngestError(
            str(path),
            None,
            "ingested, but its copy could not be kept in the object store (a rebuild "
            f"from another host will not find it; ingest it again): {error}",
        )
        return [
            (label, failed if isinstance(outcome, IngestResult) else outcome)
            for label, outcome in outcomes
        ]
    return outcomes


def _keep(
    copies: KeptRecordings,
    result: IngestResult,
    source_format: str,
    data: bytes,
    *,
    name: str,
    layout: str,
) -> bool:
    kept = copies.info(result.session_id, source_format)
    if kept is not None:
        if kept == RecordingCopy(name, layout, _sha256(data), len(data)):
            return False  # the same bytes under the same name
        if not (result.new_items or result.rebuilt):
            return False  # this copy added nothing: the kept one may be the newer
    copies.keep(result.session_id, source_format, data, name=name, layout=layout)
    return True


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_copy(
    copies: KeptRecordings,
    session_id: uuid.UUID,
    source_format: str,
    source_path: str,
    into: Path,
) -> tuple[Path, str] | None:
    """Write the kept recording of a session into the empty folder *into*, under the
    recording's own name: its path there and where it was kept; None when nothing is kept
    (no copy, and no log an upload kept at *source_path*). Raises BlobStoreError."""
    found = copies.read(session_id, source_format)
    if found is not None:
        copy, data = found
        target = into / copy.name
        if copy.layout == "folder":
            unpack_folder(data, into)
            if not target.is_dir():
                return None
        else:
            target.write_bytes(data)
        return target, copies.location(session_id, source_format)
    logs = session_logs()  # an upload's log: our own format, kept as <id>.jsonl
    if source_format != OUR_FORMAT or source_path != logs.location(session_id):
        return None
    blocks = logs.open(session_id)
    if blocks is None:
        return None
    target = into / f"{session_id}.jsonl"
    with target.open("wb") as file:
        for block in blocks:
            file.write(block)
    return target, source_path
