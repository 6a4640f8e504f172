"""`manage.py ingest PATH...`: record session logs (files, or folders of `*.jsonl`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from blobviewer.data_dir import blob_store
from blobviewer.ingest import IngestError, ingest_file, session_log_paths


class Command(BaseCommand):
    help = (
        "Ingest session logs: files, or folders searched for *.jsonl. Idempotent: a log "
        "ingested again, or after it grew, adds only its new items. A damaged file is "
        "reported as path:line: message and skipped; the others are still ingested."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")

    def handle(self, *args: Any, paths: list[Path], **options: Any) -> None:
        missing = [path for path in paths if not path.exists()]
        for path in missing:
            self.stderr.write(f"{path}: no such file or directory")
        files = session_log_paths(path for path in paths if path.exists())
        store = blob_store()
        failed = 0
        new_items = 0
        started = time.monotonic()
        for number, path in enumerate(files, start=1):
            try:
                result = ingest_file(path, store=store)
            except IngestError as error:
                failed += 1
                self.stderr.write(str(error))
                continue
            new_items += result.new_items
            note = (
                " (skipped a torn last line; it is read once complete)" if result.torn_tail else ""
            )
            missing_note = f", {result.missing_blobs} missing" if result.missing_blobs else ""
            self.stdout.write(
                f"[{number}/{len(files)}] {path}: +{result.new_items} items "
                f"({result.total_items} in all), {result.blobs} blobs{missing_note}{note}"
            )
        self.stdout.write(
            f"{len(files) - failed} of {len(files)} files ingested, "
            f"{new_items} new items, in {time.monotonic() - started:.1f}s"
        )
        if failed or missing:
            raise CommandError(
                f"{failed + len(missing)} path(s) could not be ingested", returncode=1
            )
