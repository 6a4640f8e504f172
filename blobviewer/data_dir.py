"""The parts of the data directory (settings.BLOBVIEWER_DATA), looked up on every call.

Looking the setting up each time (rather than at import) lets tests point the site at a
temporary data directory with override_settings.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from core.store import FsBlobStore


def data_dir() -> Path:
    return Path(settings.BLOBVIEWER_DATA)


def blob_store() -> FsBlobStore:
    """The FsBlobStore the agents write to: `<data>/blobs`."""
    return FsBlobStore(data_dir() / "blobs")


def sessions_dir() -> Path:
    """Where session logs are recorded: `<data>/sessions`."""
    return data_dir() / "sessions"


def renderings() -> FsBlobStore:
    """`<data>/derived`: each big JSON blob indented, as the blob page shows it, so that
    a page reads only its own lines (blobs are immutable, so is this; safe to delete)."""
    return FsBlobStore(data_dir() / "derived")
