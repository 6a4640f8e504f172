"""Separate processes for test_upload_ownership's race on POST /api/sessions.

`python tests/web/upload_race.py send SECRET LOG READY START` loads the site, creates
READY, waits for START, sends LOG with the token SECRET and prints the answer's status
and body. `python tests/web/upload_race.py inspect SESSION_ID` prints the session's
owner, title and item texts as JSON. Both read DATABASE_URL and BLOBVIEWER_DATA.

Processes, not threads: a SQLite test run keeps its database in memory, where SQLite
locks whole tables and refuses at once instead of waiting; only separate processes on a
database file (or PostgreSQL) meet the way two server workers do.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def send(secret: str, log: Path, ready: Path, start: Path) -> None:
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # lets Client's "testserver" host in
    client = Client()
    body = log.read_bytes()
    ready.touch()
    while not start.exists():  # both processes are loaded: go together
        time.sleep(0.001)
    response = client.post(
        "/api/sessions",
        data=body,
        content_type="application/x-ndjson",
        headers={"Authorization": f"Bearer {secret}"},
    )
    print(response.status_code, response.content.decode().strip())


def inspect(session_id: str) -> None:
    from blobviewer.models import Session

    session = Session.objects.select_related("owner").get(id=session_id)
    texts = list(session.items.order_by("seq").values_list("text", flat=True))
    owner = session.owner.get_username() if session.owner else None
    print(json.dumps({"owner": owner, "title": session.title, "texts": texts}))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blobviewer.settings")
    import django

    django.setup()
    command, *arguments = sys.argv[1:]
    if command == "send":
        send(arguments[0], *map(Path, arguments[1:]))
    else:
        inspect(*arguments)
