"""Importers for agent recordings that other tools write.

Each turns one file into a :class:`Recording`: a session header and item records in our
session log's shape (SPEC 2.10), with every tool output as the recording had it, whole.
Promotion into the blob store happens later, in ingest, so that re-ingesting a file stores
nothing twice. Plain Python: no Django here.
"""

from __future__ import annotations

from blobviewer.importers.detect import load_recording
from blobviewer.importers.recording import Recording, RecordingError

__all__ = ["Recording", "RecordingError", "load_recording"]
