"""`manage.py ingest PATH...`: record sessions from session logs and other agents'
recordings (files, or folders of them), each recognised by its content."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from blobviewer.data_dir import blob_store
from blobviewer.ingest import (
    IngestError,
    NotARecording,
    OutdatedSession,
    SessionPruned,
    ingest_file,
    recording_paths,
)
from blobviewer.rebuild import rebuild_targets, still_outdated
from blobviewer.session_ownership import NoSuchUser, user_named


class Command(BaseCommand):
    help = (
        "Ingest session logs and other agents' recordings (Claude Code JSONL, OpenAI chat "
        "messages, SWE-agent trajectories), recognised by content: files, or folders "
        "searched for *.jsonl, *.json and *.traj. Big tool outputs are promoted into the "
        "blob store on the way in. Idempotent: a file ingested again, or after it grew, "
        "adds only its new items. A damaged file is reported as path:line: message and "
        "skipped; the others are still ingested. A session recorded by an older importer "
        "version gets nothing appended until `ingest --rebuild` re-derives it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", type=Path, metavar="PATH")
        parser.add_argument(
            "--rebuild",
            action="store_true",
            help="re-derive the sessions of these recordings that an older importer version "
            "recorded: items keep their seqs (one no longer derived leaves a gap), outputs "
            "that did not change keep their blob ids, new ones get new blobs",
        )
        parser.add_argument(
            "--all",
            action="store_true",
            dest="rebuild_all",
            help="with --rebuild: every session recorded by an older importer version, from "
            "the recording it was ingested from",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="ingest sessions that `prune` deleted again (they are skipped otherwise)",
        )
        parser.add_argument(
            "--owner",
            metavar="USER",
            help="the user the sessions belong to: their API tokens may add to them "
            "(sessions ingested without an owner take no uploads); a session that "
            "already belongs to someone else is refused",
        )

    def handle(
        self,
        *args: Any,
        paths: list[Path],
        force: bool = False,
        owner: str | None = None,
        rebuild: bool = False,
        rebuild_all: bool = False,
        **options: Any,
    ) -> None:
        if rebuild_all and not rebuild:
            raise CommandError("--all goes with --rebuild: manage.py ingest --rebuild --all")
        if not paths and not rebuild_all:
            raise CommandError("give the recordings to ingest: manage.py ingest PATH...")
        targets = rebuild_targets() if rebuild_all else None
        if targets is not None:
            for line in targets.gone:  # kept as they are: not a failure
                self.stdout.write(line)
            paths = [*paths, *targets.paths]
        try:
            # Before any file is read: a misspelt name must not ingest sessions unowned.
            owner_user = user_named(owner) if owner is not None else None
        except NoSuchUser as error:
            raise CommandError(f"--owner: {error}") from None
        missing = [path for path in paths if not path.exists()]
        for path in missing:
            self.stderr.write(f"{path}: no such file or directory")
        files = recording_paths(path for path in paths if path.exists())
        store = blob_store()
        failed = 0
        new_items = 0
        started = time.monotonic()
        skipped = 0
        pruned = 0
        outdated = 0
        for number, (path, named) in enumerate(files, start=1):
            try:
                result = ingest_file(
                    path, store=store, force=force, owner=owner_user, rebuild=rebuild
                )
            except OutdatedSession as error:  # kept as it is until a rebuild: not a failure
                outdated += 1
                self.stdout.write(f"[{number}/{len(files)}] {error}")
                continue
            except SessionPruned as error:  # deleted on purpose: not a failure
                pruned += 1
                self.stdout.write(f"[{number}/{len(files)}] {error}")
                continue
            except NotARecording as error:
                if named:
                    failed += 1
                    self.stderr.write(str(error))
                else:  # found in a folder: not every file there is a recording
                    skipped += 1
                    self.stdout.write(f"[{number}/{len(files)}] {path}: skipped, not a recording")
                continue
            except IngestError as error:
                failed += 1
                self.stderr.write(str(error))
                continue
            except Exception as error:  # noqa: BLE001 - one bad file must not stop the run
                failed += 1
                self.stderr.write(f"{path}: could not be ingested: {type(error).__name__}: {error}")
                continue
            new_items += result.new_items
            note = (
                " (skipped a torn last line; it is read once complete)" if result.torn_tail else ""
            )
            missing_note = f", {result.missing_blobs} missing" if result.missing_blobs else ""
            if result.rebuilt:
                self.stdout.write(
                    f"[{number}/{len(files)}] {path}: rebuilt: {result.rederived_items} items "
                    f"re-derived, +{result.new_items} new, {result.removed_items} no longer "
                    f"derived ({result.total_items} in all); {result.reused_blobs} blobs kept, "
                    f"{len(result.stored_blobs)} new{missing_note}{note}"
                )
                continue
            self.stdout.write(
                f"[{number}/{len(files)}] {path}: +{result.new_items} items "
                f"({result.total_items} in all), {result.blobs} blobs{missing_note}{note}"
            )
        skipped_note = f" ({skipped} skipped: not recordings)" if skipped else ""
        if pruned:
            skipped_note += f" ({pruned} skipped: pruned sessions)"
        if outdated:
            skipped_note += f" ({outdated} skipped: recorded by another importer version)"
        for line in still_outdated(targets.sessions) if targets is not None else ():
            self.stdout.write(line)
        self.stdout.write(
            f"{len(files) - failed - skipped - pruned - outdated} of {len(files)} files ingested"
            f"{skipped_note}, "
            f"{new_items} new items, in {time.monotonic() - started:.1f}s"
        )
        if failed or missing:
            raise CommandError(
                f"{failed + len(missing)} path(s) could not be ingested", returncode=1
            )
