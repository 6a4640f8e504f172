"""Which sessions `manage.py ingest --rebuild --all` re-derives, and from which files.

A session needs a rebuild when the importer version that derived it is older than the
current one for its format (blobviewer.ingest.importers.importer_version). It is re-derived from
the recording it was ingested from (`Session.source_path`); the rebuild itself is
ingest_file(..., rebuild=True). With an object store, a session whose recording is not on
this host is re-derived from the copy ingest kept in the bucket
(blobviewer.ingest.kept_recordings), written to a scratch folder under the recording's own name.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.db.models import Q

from blobviewer.catalog.session_logs import KeptRecordings
from blobviewer.ingest.importers import importer_version
from blobviewer.ingest.kept_recordings import fetch_copy
from blobviewer.models import Session
from core.store.errors import BlobStoreError


@dataclass(frozen=True)
class RebuildTargets:
    paths: list[Path]  # recordings to re-derive, each once, in the order first met
    sessions: list[uuid.UUID]  # the outdated sessions those paths should bring up to date
    gone: list[str]  # one line for each outdated session whose recording is gone
    # Kept copies written to the scratch folder, each to ingest as the path it stands for.
    copies: dict[Path, str] = field(default_factory=dict)
    from_copies: list[str] = field(default_factory=list)  # a line for each of those


def outdated_sessions() -> list[Session]:
    """Sessions recorded by an older importer than their format's current one, oldest
    first."""
    older = Q(pk__in=[])
    for source_format in Session.objects.values_list("source_format", flat=True).distinct():
        current = importer_version(source_format)
        older |= Q(source_format=source_format, importer_version__lt=current)
    return list(Session.objects.filter(older).order_by("created_at", "id"))


def rebuild_targets(
    copies: KeptRecordings | None = None, scratch: Path | None = None
) -> RebuildTargets:
    """The recordings of every outdated session; a session whose recording is gone is
    kept as it is and named in one line. With *copies* (an object store), a recording
    not on this host is fetched from its kept copy into *scratch*."""
    paths: dict[Path, None] = {}
    sessions, gone = [], []
    targets = RebuildTargets([], [], [])
    for session in outdated_sessions():
        path = Path(session.source_path) if session.source_path else None
        # A file, or a folder that is one recording (an OpenHands conversation).
        local = path is not None and (path.is_file() or path.is_dir())
        if not local and path is not None and copies is not None and scratch is not None:
            try:
                fetched = _fetch(copies, session, scratch)
            except BlobStoreError as error:
                gone.append(
                    f"session {session.id} ({session.title or 'untitled'}): its recording "
                    f"{path} is not on this host and its kept copy cannot be read ({error}); "
                    f"kept as it is (importer version {session.importer_version})"
                )
                continue
            if fetched is not None:
                copy, where = fetched
                targets.copies[copy] = session.source_path  # as recorded (an s3:// URL too)
                targets.from_copies.append(
                    f"session {session.id} ({session.title or 'untitled'}): "
                    f"{session.source_path} is not on this host; re-derived from the copy "
                    f"kept at {where}"
                )
                paths.setdefault(copy, None)
                sessions.append(session.id)
                continue
        if path is None or not local:
            where = f"its recording {path} is gone" if path else "it has no recording path"
            gone.append(
                f"session {session.id} ({session.title or 'untitled'}): {where}; kept as it "
                f"is (importer version {session.importer_version})"
            )
            continue
        paths.setdefault(path, None)
        sessions.append(session.id)
    return RebuildTargets(list(paths), sessions, gone, targets.copies, targets.from_copies)


def _fetch(copies: KeptRecordings, session: Session, scratch: Path) -> tuple[Path, str] | None:
    """The session's kept recording, written to a folder of its own in *scratch* (two
    sessions may have recordings of the same name)."""
    into = scratch / str(session.id)
    into.mkdir(parents=True, exist_ok=True)
    return fetch_copy(copies, session.id, session.source_format, session.source_path, into)


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
