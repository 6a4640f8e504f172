"""`manage.py blobs gc|index`: look after the data folder's blob store.

    manage.py blobs gc [--older-than 1h] [--dry-run]
    manage.py blobs index [--progress-every N]

`gc` removes the temporary files that writers killed mid-write left behind (see
blobviewer.leftovers); the production server runs it once at start. `index` adds Blob rows
for blobs that agents or the CLI wrote straight into the store (page requests never do).
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.template.defaultfilters import filesizeformat

from blobviewer.blob_index import index_store
from blobviewer.data_dir import blob_store, data_dir
from blobviewer.leftovers import DEFAULT_AGE, format_age, parse_age, remove_leftovers
from blobviewer.search import index_pending_blobs
from core.store import BlobStoreError


def _age(text: str) -> Any:
    try:
        return parse_age(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1; got {text!r}")
    return number


def _bytes(size: int) -> str:
    return f"{filesizeformat(size)} ({size:,} bytes)".replace("\xa0", " ")


class Command(BaseCommand):
    help = (
        "Look after the blob store in the data folder. `gc` removes temporary files that "
        "crashed writers left behind (older than --older-than, 1h by default); `index` "
        "adds the blobs that agents or the CLI wrote straight into the store to the blob "
        "list (idempotent)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{gc,index}")
        gc = actions.add_parser(
            "gc",
            help="remove temporary files crashed writers left in blobs/, derived/, sessions/",
        )
        gc.add_argument(
            "--older-than",
            type=_age,
            default=DEFAULT_AGE,
            metavar="AGE",
            help="only files last written longer ago than this, e.g. 30m, 2h, 7d (default 1h)",
        )
        gc.add_argument(
            "--dry-run", action="store_true", help="report what would go; remove nothing"
        )
        index = actions.add_parser(
            "index", help="add rows for blobs written straight into the store"
        )
        index.add_argument(
            "--progress-every",
            type=_positive,
            default=1000,
            metavar="N",
            help="save rows and report progress every N blobs (default 1000)",
        )

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "gc":
            self._gc(older_than=options["older_than"], dry_run=options["dry_run"])
        else:
            self._index(every=options["progress_every"], verbosity=options["verbosity"])

    def _gc(self, *, older_than: Any, dry_run: bool) -> None:
        report = remove_leftovers(data_dir(), older_than=older_than, dry_run=dry_run)
        verb = "Would remove" if dry_run else "Removed"
        self.stdout.write(
            f"{verb} {report.removed:,} temporary file{'s' if report.removed != 1 else ''} "
            f"older than {format_age(older_than)} from {data_dir()}: "
            f"{_bytes(report.removed_bytes)}"
        )
        width = max(len(folder.folder) for folder in report.folders)
        for folder in report.folders:
            line = f"  {folder.folder:<{width}}  {folder.removed:,} file"
            line += "s" if folder.removed != 1 else ""
            if folder.removed:
                line += f", {_bytes(folder.removed_bytes)}"
            self.stdout.write(line)
        if report.kept_young:
            self.stdout.write(
                f"Kept {report.kept_young:,} younger temporary file"
                f"{'s' if report.kept_young != 1 else ''}: writes that may still be going on."
            )
        for failure in report.failures:
            self.stderr.write(failure)
        if report.failures:
            raise CommandError(
                f"{len(report.failures)} temporary file(s) or folder(s) could not be removed "
                "or listed",
                returncode=1,
            )

    def _index(self, *, every: int, verbosity: int) -> None:
        store = blob_store()

        def progress(done: int, total: int) -> None:
            if verbosity >= 1 and total > every:
                self.stderr.write(f"indexed {done:,} of {total:,} blobs")

        try:
            report = index_store(store, every=every, progress=progress)
            # Blobs that reached the store without an ingest or upload become searchable
            # here too; the search index is never filled by page requests.
            searchable = index_pending_blobs(store=store)
        except (BlobStoreError, OSError) as error:
            raise CommandError(f"cannot index {store.root}: {error}") from None
        self.stdout.write(
            f"{report.added:,} blob{'s' if report.added != 1 else ''} added to the index, "
            f"{report.reread:,} re-read (were missing or unreadable), "
            f"{report.vanished:,} now missing from the store, "
            f"{searchable:,} made searchable; "
            f"{report.in_store:,} blob{'s' if report.in_store != 1 else ''} in {store.root}"
        )
