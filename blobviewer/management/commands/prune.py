"""`manage.py prune --older-than 90d [--dry-run]`: retention (see blobviewer.catalog.retention)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from blobviewer.catalog.retention import PruneReport, RetentionError, parse_older_than, prune
from core.wording import plural


class Command(BaseCommand):
    help = (
        "Delete sessions whose newest activity (last item recorded or last ingest) is older "
        "than --older-than, with their items and logs, and every blob made before then that "
        "no remaining session references, with its derived files. Each leaves a tombstone: "
        "share links to a pruned blob answer 410, and ingest skips a pruned session unless "
        "--force. --dry-run reports what would be freed and deletes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            required=True,
            metavar="AGE",
            help="how long untouched: 90d, 12h or 30m (days, hours, minutes)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="report what would be freed; delete nothing"
        )

    def handle(self, *args: Any, older_than: str, dry_run: bool, **options: Any) -> None:
        try:
            report = prune(older_than=parse_older_than(older_than), dry_run=dry_run)
        except RetentionError as error:
            raise CommandError(str(error)) from None
        if options["verbosity"] >= 2:
            for session_id in report.session_ids:
                self.stdout.write(f"session {session_id}")
            for blob_id in report.blob_ids:
                self.stdout.write(f"blob {blob_id}")
        self.stdout.write(describe(report))
        for line in report.file_errors:
            self.stderr.write(line)
        if report.file_errors:
            raise CommandError(
                f"{len(report.file_errors)} file(s) could not be deleted", returncode=1
            )


def describe(report: PruneReport) -> str:
    """The report in two lines: what went (or would go), and the bytes it freed."""
    cutoff = report.cutoff.strftime("%Y-%m-%d %H:%M %Z")
    verb, freed = ("would prune", "would free") if report.dry_run else ("pruned", "freed")
    head = "dry run, nothing deleted: " if report.dry_run else ""
    return (
        f"{head}{verb} {plural(report.sessions, 'session')} "
        f"({plural(report.items, 'item')}) and {plural(report.blobs, 'blob')} "
        f"untouched since before {cutoff}\n"
        f"{freed} {report.total_bytes:,} bytes: {report.blob_bytes:,} of blob files, "
        f"{report.log_bytes:,} of session logs, {report.derived_bytes:,} of derived files"
    )
