"""`manage.py blobs gc|index|copy`: look after the site's blob store.

    manage.py blobs gc [--older-than 1h] [--dry-run]
    manage.py blobs index [--progress-every N] [--full]
    manage.py blobs copy --from DIR --to s3://bucket/prefix [--jobs N] [--progress-every N]

`gc` removes the temporary files that writers killed mid-write left behind (see
blobviewer.catalog.leftovers), the blobs that killed ingests wrote and no row references
(their journals: blobviewer.ingest.journal) and, on an object store, aborts multipart
uploads killed writers left; the production server runs it once at start. `index` adds
Blob rows for blobs that agents or the CLI wrote straight into the store (page requests
never do). `copy` moves a data folder's blobs, indexes, renderings and session logs into
an object store (blobviewer.catalog.store_copy).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.template.defaultfilters import filesizeformat

from blobviewer.catalog.leftovers import (
    DEFAULT_AGE,
    abort_stale_uploads,
    format_age,
    parse_leftover_age,
    remove_leftovers,
)
from blobviewer.catalog.store_copy import DEFAULT_JOBS, CopyError, PartReport, copy_data
from blobviewer.catalog.store_scan import catalog_store
from blobviewer.data_dir import blob_store, blobs_url, data_dir, store_location
from blobviewer.ingest.journal import settle_journals
from blobviewer.search.indexing import index_pending_blobs
from core.store import BlobStoreError


def _age(text: str) -> Any:
    try:
        return parse_leftover_age(text)
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
        "Look after the site's blob store. `gc` removes temporary files that crashed "
        "writers left behind (older than --older-than, 1h by default), the blobs that "
        "killed ingests wrote and no session references and, on an object store, aborts "
        "killed writers' multipart uploads; `index` adds the blobs that agents or the "
        "CLI wrote straight into the store to the blob list (idempotent); `copy` copies a "
        "data folder's blobs, indexes and session logs into an object store (resumable)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{gc,index,copy}")
        gc = actions.add_parser(
            "gc",
            help="remove temporary files crashed writers left in blobs/, derived/, sessions/, "
            "the blobs killed ingests wrote that no session references (and stale multipart "
            "uploads in an object store)",
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
        index.add_argument(
            "--full",
            action="store_true",
            help="on an object store, list every blob (also finds blobs gone from the store), "
            "not only those after the last run's marker",
        )
        copy = actions.add_parser(
            "copy",
            help="copy a data folder's blobs, indexes, renderings and session logs into an "
            "object store (idempotent, resumable)",
        )
        copy.add_argument(
            "--from",
            dest="source",
            type=Path,
            default=None,
            metavar="DIR",
            help="the data folder (with blobs/, sessions/), or a blob folder alone "
            "(default BLOBVIEWER_DATA)",
        )
        copy.add_argument(
            "--to",
            dest="destination",
            default=None,
            metavar="URL",
            help="s3://bucket/prefix (default BLOBVIEWER_BLOBS)",
        )
        copy.add_argument(
            "--jobs",
            type=_positive,
            default=DEFAULT_JOBS,
            metavar="N",
            help=f"objects copied at once (default {DEFAULT_JOBS})",
        )
        copy.add_argument(
            "--progress-every",
            type=_positive,
            default=100,
            metavar="N",
            help="report progress every N objects (default 100)",
        )

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "gc":
            self._gc(older_than=options["older_than"], dry_run=options["dry_run"])
        elif action == "copy":
            self._copy(
                source=options["source"] or data_dir(),
                destination=options["destination"] or blobs_url(),
                jobs=options["jobs"],
                every=options["progress_every"],
                verbosity=options["verbosity"],
            )
        else:
            self._index(
                every=options["progress_every"],
                verbosity=options["verbosity"],
                full=options["full"],
            )

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
        failures = list(report.failures)
        failures += self._settle(dry_run=dry_run)
        if blobs_url():
            try:
                uploads = abort_stale_uploads(blob_store(), older_than=older_than, dry_run=dry_run)
            except BlobStoreError as error:
                failures.append(f"cannot list the multipart uploads of {blobs_url()}: {error}")
            else:
                verb = "Would abort" if dry_run else "Aborted"
                self.stdout.write(
                    f"{verb} {uploads:,} multipart upload{'s' if uploads != 1 else ''} "
                    f"older than {format_age(older_than)} in {blobs_url()}"
                )
        for failure in failures:
            self.stderr.write(failure)
        if failures:
            raise CommandError(
                f"{len(failures)} temporary file(s), folder(s), blob(s) or upload(s) could not "
                "be removed or listed",
                returncode=1,
            )

    def _settle(self, *, dry_run: bool) -> list[str]:
        """Settle the journals of killed ingests (whatever their age: a journal's lock says
        whether its ingest still runs); what failed."""
        settled = settle_journals(blob_store(), dry_run=dry_run)
        for line in settled.lines(dry_run=dry_run):
            self.stdout.write(line)
        if settled.running:
            self.stdout.write(
                f"Kept the journal{'s' if settled.running != 1 else ''} of "
                f"{settled.running:,} ingest{'s' if settled.running != 1 else ''} still running."
            )
        return settled.failures

    def _index(self, *, every: int, verbosity: int, full: bool) -> None:
        store = blob_store()

        def progress(done: int, total: int) -> None:
            if verbosity >= 1 and total > every:
                self.stderr.write(f"indexed {done:,} of {total:,} blobs")

        try:
            report = catalog_store(store, every=every, progress=progress, full=full)
            # Blobs that reached the store without an ingest or upload become searchable
            # here too; the search index is never filled by page requests.
            searchable = index_pending_blobs(store=store)
        except (BlobStoreError, OSError) as error:
            raise CommandError(f"cannot index {store_location()}: {error}") from None
        self.stdout.write(
            f"{report.added:,} blob{'s' if report.added != 1 else ''} added to the index, "
            f"{report.reread:,} re-read (were missing or unreadable), "
            f"{report.vanished:,} now missing from the store, "
            f"{searchable:,} made searchable; "
            f"{report.in_store:,} blob{'s' if report.in_store != 1 else ''} in {store_location()}"
            + (
                f" made since {report.listed_since:%Y-%m-%d %H:%M:%S} UTC (listed from the "
                "last run's marker; --full lists every blob and finds those gone)"
                if report.listed_since
                else ""
            )
        )

    def _copy(
        self, *, source: Path, destination: str, jobs: int, every: int, verbosity: int
    ) -> None:
        if not destination:
            raise CommandError("blobs copy needs --to s3://bucket/prefix (or BLOBVIEWER_BLOBS)")

        def progress(part: PartReport) -> None:
            if verbosity >= 1:
                self.stderr.write(
                    f"{part.name}: {part.done:,} of {part.total:,} done "
                    f"({part.copied:,} copied, {_bytes(part.copied_bytes)})"
                )

        try:
            report = copy_data(
                source.absolute(), destination, jobs=jobs, progress=progress, every=every
            )
        except (CopyError, BlobStoreError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"Copied {source} to {destination}:")
        for part in report.parts:
            line = (
                f"  {part.name}: {part.total:,} in the source, {part.copied:,} copied "
                f"({_bytes(part.copied_bytes)}), {part.present:,} already there"
            )
            if part.indexes:
                line += f", {part.indexes:,} index{'es' if part.indexes != 1 else ''} copied"
            if part.failures:
                line += f", {len(part.failures):,} failed"
            self.stdout.write(line)
        for failure in report.failures:
            self.stderr.write(failure)
        if report.failures:
            raise CommandError(
                f"{len(report.failures):,} object(s) could not be copied or verified; "
                "run the copy again to retry them",
                returncode=1,
            )
        self.stdout.write("Every object in the destination has the size it has in the source.")
