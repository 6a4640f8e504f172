"""Why a session was not ingested: the errors ingest raises, each a message a user can act
on that names no path on the server (the upload API passes them on)."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth import get_user_model

from blobviewer.catalog.retention import session_pruned_message
from blobviewer.models import PrunedSession


class IngestError(Exception):
    """A session could not be ingested; nothing of it was written. Reads `path:line: msg`.

    *message* never names a path on the server, so the upload API can pass it on;
    *detail* is for the operator at the command line (e.g. the file a session was
    recorded from) and is only part of str(error).
    """

    def __init__(self, path: str, line: int | None, message: str, *, detail: str = "") -> None:
        self.path = path
        self.line = line
        self.message = message
        self.detail = detail
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}" + (f" ({detail})" if detail else ""))


class NotResumable(Exception):
    """A read that resumed where the last ingest of a grown recording ended does not fit
    the session as recorded (a line repeated from before, or a session emptied since):
    nothing was written, and the file is to be read whole."""


class NotARecording(IngestError):
    """The file is in no format blobviewer reads (a folder scan skips such files)."""


class PartOfAnother(NotARecording):
    """The file is part of another recording beside it (an ATIF trajectory's continuation
    or sub-agent), read with that one: skipped on its own, said why."""


class OutdatedSession(IngestError):
    """The session was recorded by another version of its importer: a plain ingest appends
    nothing to it (its items would not match), and `manage.py ingest --rebuild` re-derives
    it. The message is one line and names no server path (the upload API answers 409)."""

    def __init__(
        self, path: str, session_id: uuid.UUID, source_format: str, recorded: int, current: int
    ) -> None:
        if recorded < current:
            message = (
                f"session {session_id} was recorded by an older {source_format} importer "
                f"(version {recorded}; this is version {current}): nothing appended; "
                "run manage.py ingest --rebuild to re-derive it"
            )
        else:
            message = (
                f"session {session_id} was recorded by a newer {source_format} importer "
                f"(version {recorded}; this is version {current}): nothing appended"
            )
        super().__init__(path, None, message)
        self.session_id = session_id
        self.recorded_version = recorded
        self.current_version = current


class SessionPruned(IngestError):
    """The session was deleted by `manage.py prune`; it is ingested again only when forced.
    Reads `path: skipped: session <id> was pruned on DATE; use --force to ingest it again`."""

    def __init__(self, path: str, tombstone: PrunedSession) -> None:
        super().__init__(path, None, session_pruned_message(tombstone.id, tombstone.pruned_at))
        self.tombstone = tombstone


class NotTheirs(IngestError):
    """The session belongs to a user other than the ingest's owner (HTTP 403)."""


def owned_by_another(session_id: uuid.UUID, source_path: str, owner_id: Any) -> IngestError:
    """The error for a session that belongs to a user other than the ingest's owner, or
    to no one (the owner's name only in the detail, for the operator)."""
    owner = get_user_model().objects.filter(pk=owner_id).first()
    return NotTheirs(
        source_path,
        None,
        f"session {session_id} belongs to another user; manage.py sessions chown changes it",
        detail=f"its owner is {owner}" if owner else "",
    )
