"""`manage.py serve_demo` (what `make run` runs): the site with demo data, one command.

Migrates, writes the demo sessions into the data directory when it has none, ingests
them, creates an `admin` user with a random password (printed once) when there are no
users, then runs the development server on 127.0.0.1:8000.

With BLOBVIEWER_BLOBS on an object store the demo's blobs go into the bucket (`python -m
core demo --store URL`), where every server on it reads them, and ingest keeps the demo's
logs there too; the demo is then written only when the database has no sessions either,
so a second server on the same database and bucket does not add a second demo.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from blobviewer.data_dir import blobs_url, data_dir, on_object_store, sessions_dir
from blobviewer.models import Session


class Command(BaseCommand):
    help = "Migrate, load demo sessions on first run, and serve the site at 127.0.0.1:8000."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument(
            "--no-serve", action="store_true", help="prepare everything but do not serve"
        )

    def handle(self, *args: Any, addrport: str, no_serve: bool, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        sessions = sessions_dir()
        shared = on_object_store() and Session.objects.exists()  # another server's demo
        if not any(sessions.glob("*.jsonl")) and not shared:
            self._write_demo()
        if any(sessions.glob("*.jsonl")):
            call_command("ingest", str(sessions), stdout=self.stdout, stderr=self.stderr)
        self._ensure_admin()
        self.stdout.write(f"Data directory: {data_dir()}")
        if on_object_store():
            self.stdout.write(f"Blobs: {blobs_url()}")
        if not no_serve:
            call_command("runserver", addrport, use_reloader=False)

    def _write_demo(self) -> None:
        self.stdout.write(f"No sessions in {sessions_dir()}; writing the demo sessions...")
        command = [sys.executable, "-m", "core", "demo", "--data", str(data_dir())]
        if on_object_store():  # the AWS_* variables pass on to it with the environment
            command += ["--store", blobs_url()]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        self.stdout.write(result.stdout.rstrip())
        if result.returncode != 0:
            self.stderr.write(
                "Could not write the demo data (`python -m core demo` failed); the site "
                "starts empty. Record sessions with core and run `manage.py ingest "
                f"{sessions_dir()}`.\n{result.stderr.strip()}"
            )

    def _ensure_admin(self) -> None:
        users = get_user_model()
        if users.objects.exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", password=password)
        self.stdout.write(
            self.style.SUCCESS(f"Created user admin with password {password}  (shown only once)")
        )
