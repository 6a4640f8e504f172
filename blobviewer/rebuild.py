"""Which sessions `manage.py ingest --rebuild --all` re-derives, and from which files.

A session needs a rebuild when the importer version that derived it is older than the
current one for its format (blobviewer.importers.importer_version). It is re-derived from
the recording it was ingested from (`Session.source_path`); the rebuild itself is
ingest_file(..., rebuild=True).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.db.models import Q

from blobviewer.importers import importer_version
from blobviewer.models import Session


@dataclass(frozen=True)
class RebuildTargets:
    paths: list[Path]  # recordings to re-derive, each once, in the order first met
    sessions: list[uuid.UUID]  # the outdated sessions those paths should bring up to date
    gone: list[str]  # one line for each outdated session whose recording is gone


def outdated_sessions() -> list[Session]:
    """Sessions recorded by an older importer than their format's current one, oldest
    first."""
    older = Q(pk__in=[])
    for source_format in Session.objects.values_list("source_format", flat=True).distinct():
        current = importer_version(source_format)
        older |= Q(source_format=source_format, importer_version__lt=current)
    return list(Session.objects.filter(older).order_by("created_at", "id"))


def rebuild_targets() -> RebuildTargets:
    """The recordings of every outdated session; a session whose recording is gone is
    kept as it is and named in one line."""
    paths: dict[Path, None] = {}
    sessions, gone = [], []
    for session in outdated_sessions():
        path = Path(session.source_path) if session.source_path else None
        # A file, or a folder that is one recording (an OpenHands conversation).
        if path is None or not (path.is_file() or path.is_dir()):
            where = f"its recording {path} is gone" if path else "it has no recording path"
            gone.append(
                f"session {session.id} ({session.title or 'untitled'}): {where}; kept as it "
                f"is (importer version {session.importer_version})"
            )
            continue
        paths.setdefault(path, None)
        sessions.append(session.id)
    return RebuildTargets(list(paths), sessions, gone)


def still_outdated(session_ids: Iterable[uuid.UUID]) -> list[str]:
    """One line for each of *session_ids* a rebuild left outdated (its file now holds
    another recording, or failed to ingest: that failure has its own line)."""
    lines = []
    for session in Session.objects.filter(id__in=list(session_ids)).order_by("created_at"):
        current = importer_version(session.source_format)
        if session.importer_version < current:
            lines.append(
                f"session {session.id} ({session.title or 'untitled'}): still recorded by "
                f"importer version {session.importer_version} (now {current}); "
                f"{session.source_path} did not re-derive it; kept as it is"
            )
    return lines
