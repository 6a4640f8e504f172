"""`manage.py sessions chown SESSION_ID USER`: give a recorded session an owner, whose API
tokens may then add to it (see blobviewer.team.ownership). `manage.py sessions export
SESSION_ID --format atif|html`: write a session as an ATIF trajectory or one HTML file
(blobviewer.catalog.export_atif, export_html; docs/export.md)."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, transaction

from blobviewer.catalog.export_atif import ExportError, Write, write_atif
from blobviewer.catalog.export_html import write_html
from blobviewer.data_dir import blob_store
from blobviewer.models import Session
from blobviewer.team.ownership import NoSuchUser, user_named


class Command(BaseCommand):
    help = (
        "Manage recorded sessions. `chown SESSION_ID USER` makes USER the session's owner: "
        "only the owner's API tokens may add items or missing blobs to it (every "
        "logged-in user still sees every session). `export SESSION_ID --format atif|html` "
        "writes the session as an ATIF trajectory or as one HTML file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        chown = actions.add_parser(
            "chown",
            help="give a session an owner",
            description="Make USER the owner of the session SESSION_ID.",
        )
        chown.add_argument("session_id", metavar="SESSION_ID")
        chown.add_argument("username", metavar="USER")
        export = actions.add_parser(
            "export",
            help="write a session as an ATIF trajectory or one HTML file",
            description=(
                "Write the session SESSION_ID as an ATIF v1.7 trajectory (promoted outputs "
                "as their summaries, or whole with --inline-blobs) or as one self-contained "
                "HTML file of its timeline, to FILE or to standard output."
            ),
        )
        export.add_argument("session_id", metavar="SESSION_ID")
        export.add_argument("--format", default="atif", metavar="atif|html")
        export.add_argument(
            "--inline-blobs",
            action="store_true",
            help="ATIF: each promoted output whole, read from the blob store",
        )
        export.add_argument("--output", "-o", metavar="FILE", help="the file to write")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "chown":
            self._chown(options["session_id"], options["username"])
        elif action == "export":
            self._export(
                options["session_id"],
                export_format=options["format"],
                inline_blobs=options["inline_blobs"],
                output=options["output"],
            )

    def _export(
        self, session_text: str, *, export_format: str, inline_blobs: bool, output: str | None
    ) -> None:
        if export_format not in ("atif", "html"):
            raise CommandError(f"unknown format {export_format[:40]!r}: atif or html")
        if inline_blobs and export_format != "atif":
            raise CommandError(
                "--inline-blobs is for --format atif (HTML shows promoted outputs as summaries)"
            )
        session_id = _session_id(session_text)
        try:
            session = Session.objects.filter(id=session_id).first()
        except DatabaseError as error:  # e.g. a data folder never ingested into
            raise CommandError(f"cannot read the sessions: {str(error).splitlines()[0]}") from None
        if session is None:
            raise CommandError(f"no session {session_id}")

        def warn(message: str) -> None:
            self.stderr.write(message)

        def export(write: Write) -> None:
            if export_format == "html":
                write_html(session, write)
            else:
                store = blob_store() if inline_blobs else None
                write_atif(session, write, store=store, warn=warn)

        try:
            if output is None:
                export(lambda text: self.stdout.write(text, ending=""))
            else:
                _write_file(Path(output), export)
        except ExportError as error:
            raise CommandError(str(error)) from None

    def _chown(self, session_text: str, username: str) -> None:
        session_id = _session_id(session_text)
        try:
            owner = user_named(username)
        except NoSuchUser as error:
            raise CommandError(str(error)) from None
        with transaction.atomic():
            # Locked, so an upload of this session finishes under its old owner or starts
            # under the new one, never in between.
            session = Session.objects.select_for_update().filter(id=session_id).first()
            if session is None:
                raise CommandError(f"no session {session_id}")
            previous = session.owner
            session.owner = owner
            session.save(update_fields=["owner"])
        was = "nobody" if previous is None else str(previous)
        self.stdout.write(
            # repr: a title is untrusted text, and control characters must not reach
            # the terminal as such.
            f"session {session_id} {session.title!r} now belongs to {owner} (was {was})"
        )


def _session_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise CommandError(
            f"not a session id: {text[:60]!r} (expected a UUID, as in the "
            "session's address /sessions/<id>/)"
        ) from None


def _write_file(path: Path, export: Callable[[Write], None]) -> None:
    """Run *export* into a temporary file beside *path*, which becomes *path* only when
    the export is complete: a failed export leaves no half-written file."""
    try:
        descriptor, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name[:100]}.", suffix=".tmp"
        )
    except OSError as error:
        raise CommandError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        with open(descriptor, "w", encoding="utf-8", newline="") as file:
            export(file.write)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise CommandError(f"cannot write {path}: {error.strerror or error}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
