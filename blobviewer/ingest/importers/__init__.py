"""Importers for agent recordings that other tools write.

Each turns one file into a :class:`Recording`: a session header and item records in our
session log's shape (docs/session-log.md), with every tool output as the recording had it, whole.
Promotion into the blob store happens later, in ingest, so that re-ingesting a file stores
nothing twice. Plain Python: no Django here.
"""

from __future__ import annotations

from blobviewer.ingest.importers.detect import (
    FOLDER_MARKERS,
    OUR_FORMAT,
    RESUMABLE,
    detect,
    folder_layout,
    holds_runs,
    importer_version,
    load_folder,
    load_folder_sessions,
    load_recording,
    load_runs,
    load_sessions,
    load_sniffed,
    read_bytes,
    sniff,
)
from blobviewer.ingest.importers.recording import Recording, RecordingError, UnknownFormat

__all__ = [
    "FOLDER_MARKERS",
    "OUR_FORMAT",
    "RESUMABLE",
    "Recording",
    "RecordingError",
    "UnknownFormat",
    "detect",
    "folder_layout",
    "holds_runs",
    "importer_version",
    "load_folder",
    "load_folder_sessions",
    "load_recording",
    "load_runs",
    "load_sessions",
    "load_sniffed",
    "read_bytes",
    "sniff",
]
