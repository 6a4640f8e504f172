"""`manage.py sessions chown SESSION_ID USER`: give a recorded session an owner, whose API
tokens may then add to it (see blobviewer.team.ownership)."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from blobviewer.models import Session
from blobviewer.team.ownership import NoSuchUser, user_named


class Command(BaseCommand):
    help = (
        "Manage recorded sessions. `chown SESSION_ID USER` makes USER the session's owner: "
        "only the owner's API tokens may add items or missing blobs to it (every "
        "logged-in user still sees every session)."
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

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "chown":
            self._chown(options["session_id"], options["username"])

    def _chown(self, session_text: str, username: str) -> None:
        try:
            session_id = uuid.UUID(session_text.strip())
        except ValueError:
            raise CommandError(
                f"not a session id: {session_text[:60]!r} (expected a UUID, as in the "
                "session's address /sessions/<id>/)"
            ) from None
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
