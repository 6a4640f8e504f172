"""`manage.py ingest PATH...`: record sessions from session logs and other agents'
recordings (files, or folders of them), each recognised by its content. `--agents` adds
the folders where the agents blobviewer knows keep their recordings on this machine
(blobviewer.ingest.agent_folders); `--watch` keeps running after the first pass and ingests
each recording again as it changes (blobviewer.ingest.watch). A record over `--max-record`
is skipped with a line that says so (blobviewer.ingest.importers.json_lines); a symbolic
link found in a folder is followed only inside the folders given unless `--follow-links`
(blobviewer.ingest.finding.Links). On a terminal a progress line is rewritten in place
below the per-file lines (blobviewer.ingest.progress). The database is checked first
(blobviewer.ingest.database_ready): the data directory's own SQLite database is migrated on
first use, another database with migrations to apply is refused. With nothing to do,
manage.py answers before Django starts (blobviewer.ingest.quick_check)."""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections, connection

from blobviewer.catalog.session_logs import kept_recordings
from blobviewer.data_dir import blob_store
from blobviewer.ingest.agent_folders import RecordingFilter, describe_search, find_agent_folders
from blobviewer.ingest.database_ready import (
    DatabaseNotReady,
    prepare_database,
    refresh_statistics,
)
from blobviewer.ingest.errors import (
    IngestError,
    NotARecording,
    OutdatedSession,
    PartOfAnother,
    SessionPruned,
)
from blobviewer.ingest.finding import Links, recording_paths
from blobviewer.ingest.importers.json_lines import (
    DEFAULT_MAX_RECORD,
    SkippedRecord,
    megabytes,
    size_in_bytes,
)
from blobviewer.ingest.importers.long_lines import map_large_blocks
from blobviewer.ingest.journal import settle_at_start
from blobviewer.ingest.options import IngestOptions
from blobviewer.ingest.progress import PassTally, ProgressLine, Tally, Unended, is_terminal
from blobviewer.ingest.rebuild import rebuild_targets, still_outdated
from blobviewer.ingest.recording_files import ReadState
from blobviewer.ingest.recording_run import IngestRun
from blobviewer.ingest.sessions import IngestResult
from blobviewer.ingest.watch import WatchError, WatchRoot, follow, stop_on_signals
from blobviewer.team.ownership import NoSuchUser, user_named


class Command(BaseCommand):
    help = (
        "Ingest session logs and other agents' recordings (Claude Code JSONL, OpenAI chat "
        "messages, SWE-agent trajectories, Codex, Gemini CLI, OpenHands), recognised by "
        "content: files, or folders searched for *.jsonl, *.json, *.traj and OpenHands "
        "conversation folders; an OpenHands evaluation output is a session per run. Big "
        "tool outputs are promoted into the blob store on the way in. Idempotent: a file "
        "ingested again, or after it grew, adds only its new items. A damaged file is "
        "reported as path:line: message and skipped. A session recorded by an older "
        "importer version gets nothing appended until `ingest --rebuild` re-derives it. "
        "The data directory's SQLite database is migrated first; a DATABASE_URL one "
        "must be migrated with `manage.py migrate`."
    )
    requires_system_checks: list[str] = []  # the site's (URLs, views, admin): the server's

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", type=Path, metavar="PATH")
        parser.add_argument(
            "--agents",
            action="store_true",
            help="also ingest the folders where the agents blobviewer knows keep their "
            "recordings on this machine (~/.claude/projects, ~/.codex/sessions, "
            "~/.gemini/tmp, and OpenHands' ~/.openhands/conversations, sessions and users), "
            "saying which were found",
        )
        parser.add_argument(
            "--watch",
            action="store_true",
            help="keep running: after ingesting what is there, ingest each recording again "
            "as it changes (new files, grown files; a torn last line or a half-written "
            "document is read once complete) until Ctrl-C or SIGTERM, then print a summary "
            "and exit 0",
        )
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
            "--max-record",
            type=_size,
            default=DEFAULT_MAX_RECORD,
            metavar="SIZE",
            help="skip a record larger than SIZE (MB, or with a unit: 512K, 300M, 2G; "
            f"default {megabytes(DEFAULT_MAX_RECORD)}) with a line naming its file, line and "
            "size; the rest of the file is still ingested",
        )
        parser.add_argument(
            "--follow-links",
            action="store_true",
            help="follow symbolic links found in the folders given that lead outside them "
            "(they are passed over, with a line each, unless this is given; a PATH given "
            "that is itself a link is always followed)",
        )
        parser.add_argument(
            "--owner",
            metavar="USER",
            help="the user the sessions belong to: their API tokens may add to them "
            "(sessions ingested without an owner take no uploads); a session that "
            "already belongs to someone else is refused",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # A long record's strings grow in place and its memory goes back once it is read.
        map_large_blocks()
        # Nothing reads this process's query log, which DEBUG (the development default)
        # would keep, quoting each statement's values with one more query on SQLite: 6% of
        # an ingest. Put back after, for a caller in a process that serves pages.
        debug, settings.DEBUG = settings.DEBUG, False
        # A rebuild on a host without a session's recording fetches its kept copy here.
        try:
            with tempfile.TemporaryDirectory(prefix="blobviewer-ingest-") as scratch:
                self._scratch = Path(scratch)
                self._handle(*args, **options)
        finally:
            settings.DEBUG = debug

    def _handle(
        self,
        *args: Any,
        paths: list[Path],
        agents: bool = False,
        watch: bool = False,
        force: bool = False,
        owner: str | None = None,
        rebuild: bool = False,
        rebuild_all: bool = False,
        max_record: int = DEFAULT_MAX_RECORD,
        follow_links: bool = False,
        **options: Any,
    ) -> None:
        _check_flags(paths, agents=agents, watch=watch, rebuild=rebuild, rebuild_all=rebuild_all)
        try:
            migrated = prepare_database()
        except DatabaseNotReady as error:
            raise CommandError(str(error)) from None
        if migrated:
            self.stdout.write(migrated)
        for line in settle_at_start(blob_store()):  # what killed ingests left in the store
            self.stdout.write(line)
        copies = kept_recordings()
        targets = rebuild_targets(copies, self._scratch) if rebuild_all else None
        if targets is not None:
            for line in targets.gone:  # kept as they are: not a failure
                self.stdout.write(line)
            for line in targets.from_copies:
                self.stdout.write(line)
            paths = [*paths, *targets.paths]
        try:
            # Before any file is read: a misspelt name must not ingest sessions unowned.
            owner_user = user_named(owner) if owner is not None else None
        except NoSuchUser as error:
            raise CommandError(f"--owner: {error}") from None
        accepts: RecordingFilter | None = None
        if agents:
            found = find_agent_folders()
            for line in describe_search(found):
                self.stdout.write(line)
            accepts = RecordingFilter(found)
            paths = [*paths, *(entry.path for entry in found if entry.exists)]
        missing = [path for path in paths if not path.exists()]
        for path in missing:
            self.stderr.write(f"{path}: no such file or directory")
        if watch and missing:
            raise CommandError(f"{len(missing)} path(s) cannot be watched: they do not exist")
        if watch and not paths:
            raise CommandError("nothing to watch: no agent folder was found")
        present = [path for path in paths if path.exists()]
        sources = targets.copies if targets is not None else {}
        ingest_options = IngestOptions(force=force, owner=owner_user, rebuild=rebuild)
        links = Links(present, follow=follow_links)
        run = IngestRun(blob_store(), ingest_options, links, max_record, copies, sources)
        stop = threading.Event()
        with stop_on_signals(stop):
            if watch:
                self._watch(present, accepts, run, stop)
                return
            files = self._files(present, accepts, run)
            # Sessions a rebuild could not re-derive are listed before the summary.
            tally = self._first_pass(
                files,
                run,
                stop,
                before_summary=lambda: still_outdated(targets.sessions) if targets else (),
            )
            if tally.new_items and (warning := refresh_statistics()):
                self.stderr.write(warning)
        if stop.is_set():
            raise CommandError(
                f"stopped before {len(files) - tally.done} of {len(files)} files", returncode=1
            )
        if tally.failed or missing:
            raise CommandError(
                f"{tally.failed + len(missing)} path(s) could not be ingested", returncode=1
            )

    # --- the first pass -------------------------------------------------------------------

    def _files(
        self, paths: list[Path], accepts: RecordingFilter | None, run: IngestRun
    ) -> list[tuple[Path, bool]]:
        """The recordings *paths* hold (each link not followed said in a line)."""
        files = recording_paths(paths, links=run.links)
        self._say_links(run.links)
        return files if accepts is None else [f for f in files if f[1] or accepts(f[0])]

    def _say_links(self, links: Links) -> None:
        for line in links.unsaid():
            self._say(line)

    def _first_pass(
        self,
        files: list[tuple[Path, bool]],
        run: IngestRun,
        stop: threading.Event,
        before_summary: Callable[[], Iterable[str]] = tuple,
        said: dict[str, str] | None = None,
    ) -> PassTally:
        """Ingest *files* in order, a line each (then *before_summary*'s lines) and the
        summary; stops between files once *stop* is set. A file as its last ingest left
        it is not read (blobviewer.ingest.unchanged)."""
        started = time.monotonic()
        tally = PassTally()
        progress = (
            ProgressLine(Unended(self.stdout), len(files)) if is_terminal(self.stdout) else None
        )
        self._progress = progress
        try:
            self._in_turn(files, run, stop, tally, said)
        finally:
            if progress is not None:
                progress.clear()
            self._progress = None
        for line in before_summary():
            self.stdout.write(line)
        self.stdout.write(tally.summary(len(files), time.monotonic() - started))
        return tally

    def _in_turn(
        self,
        files: list[tuple[Path, bool]],
        run: IngestRun,
        stop: threading.Event,
        tally: PassTally,
        said: dict[str, str] | None,
    ) -> None:
        """The files one after the other, in this process."""
        seen = run.seen
        for number, (path, named) in enumerate(files, start=1):
            if stop.is_set():
                break
            self._show_progress(number, tally, path)
            mark = seen.key(path)
            prefix = f"[{number}/{len(files)}] "
            state = seen.plan(path, mark)
            if state is None:
                tally.ingested += 1
                tally.unchanged += 1
                self._say(PassTally.unchanged_line(prefix, path), quiet=True)
            else:
                failed = tally.failed
                self._ingest(path, named, prefix, tally, run, said, state)
                if path in run.sources:
                    pass  # a kept copy fetched for a rebuild, gone when the run ends
                elif tally.failed == failed:
                    seen.remember(path, mark, state)
                else:  # read again next time, however it failed
                    seen.forget(path)
            tally.done = number

    def _show_progress(self, number: int, tally: Tally, path: Path) -> None:
        """On a terminal: file *number* (*path*) is next."""
        if self._progress is not None:
            self._progress.update(done=number - 1, items=tally.new_items, current=path)

    # --- one recording ----------------------------------------------------------------------

    _progress: ProgressLine | None = None

    def _say(self, line: str, *, error: bool = False, quiet: bool = False) -> None:
        """A line about one file: on a terminal above the progress line (a *quiet* line, a
        file that added nothing, only piped: on a terminal the progress line counts it)."""
        progress = self._progress
        if progress is not None and quiet:
            return
        if progress is not None:
            progress.clear()
        (self.stderr if error else self.stdout).write(line)
        if progress is not None:
            progress.draw()

    def _ingest(
        self,
        path: Path,
        named: bool,
        prefix: str,
        tally: Tally,
        run: IngestRun,
        said: dict[str, str] | None = None,
        state: ReadState | None = None,
    ) -> bool:
        """Ingest one recording and report it (a line per session; an evaluation output
        has one per run); True when nothing about it failed. *said* (watching) keeps the
        last outdated or pruned message of each session, so a recording that keeps
        growing says it once, not at every change, until something else happens to it.
        *state*: where to read from, and where the read ended (see open_recording)."""
        skipped: list[SkippedRecord] = []
        outcomes = run.outcomes(path, skipped, state)
        for record in skipped:  # a line each, before what the rest of the file came to
            key = f"{path}:{record.line}"
            if said is None or said.get(key) != str(record):
                tally.over_max_record += 1
                self._say(str(record), error=True)
            if said is not None:
                said[key] = str(record)
        if skipped and all(isinstance(outcome, NotARecording) for _, outcome in outcomes):
            return True  # nothing but records over the cap: said above, not a failure
        return self._report(run.recording(path), named, prefix, tally, outcomes, said)

    def _report(
        self,
        path: Path,
        named: bool,
        prefix: str,
        tally: Tally,
        outcomes: list[tuple[str, Any]],
        said: dict[str, str] | None = None,
    ) -> bool:
        """Report what ingesting *path* (the recording, as its session names it) came to,
        a line per session; True when nothing about it failed."""
        ok = all(isinstance(outcome, IngestResult) for _, outcome in outcomes)
        tally.ingested += ok
        # An evaluation output holds several runs: a line for each (label: which run).
        for label, outcome in outcomes:
            run = label.startswith("line ")  # a run of an evaluation output, not a sub-agent
            tally.runs += run
            where_run = f" [{label}]" if label else ""
            try:
                if isinstance(outcome, BaseException):
                    raise outcome
                result = outcome
            except (OutdatedSession, SessionPruned) as error:  # kept as they are: not failures
                if isinstance(error, OutdatedSession):  # until a rebuild
                    tally.outdated += 1
                else:  # deleted on purpose, until --force
                    tally.pruned += 1
                said_key = f"{path}{where_run}"
                if said is None or said.get(said_key) != str(error):
                    self._say(f"{prefix}{error}{where_run}")
                if said is not None:
                    said[said_key] = str(error)
                continue
            except PartOfAnother as error:  # read with the recording it is part of
                tally.skipped += 1
                self._say(f"{prefix}{path}: skipped, {error.message}")
                continue
            except NotARecording as error:
                if named:
                    tally.failed += 1
                    self._say(str(error), error=True)
                else:  # found in a folder: not every file there is a recording
                    tally.skipped += 1
                    self._say(f"{prefix}{path}: skipped, not a recording")
                continue
            except IngestError as error:
                tally.failed += 1
                self._say(f"{error}{where_run if error.line is None else ''}", error=True)
                continue
            except Exception as error:  # noqa: BLE001 - one bad file must not stop the run
                tally.failed += 1
                self._say(
                    f"{path}: could not be ingested: {type(error).__name__}: {error}", error=True
                )
                continue
            tally.runs_ingested += run
            where = f"{path}{where_run}"
            if said is not None:
                said.pop(where, None)
            tally.new_items += result.new_items
            note = (
                " (skipped a torn last line; it is read once complete)" if result.torn_tail else ""
            )
            missing_note = f", {result.missing_blobs} missing" if result.missing_blobs else ""
            if result.rebuilt:
                self._say(
                    f"{prefix}{where}: rebuilt: {result.rederived_items} "
                    f"items re-derived, +{result.new_items} new, {result.removed_items} no "
                    f"longer derived ({result.total_items} in all); {result.reused_blobs} "
                    f"blobs kept, {len(result.stored_blobs)} new{missing_note}{note}"
                )
                continue
            self._say(
                f"{prefix}{where}: +{result.new_items} items "
                f"({result.total_items} in all), {result.blobs} blobs{missing_note}{note}",
                quiet=not result.new_items and not note and not missing_note,
            )
        return ok

    def _flush(self) -> None:
        """Watching, output is read as it comes (a log, `| tee`): not held in a buffer."""
        self.stdout.flush()
        self.stderr.flush()

    # --- watching ---------------------------------------------------------------------------

    def _watch(
        self,
        paths: list[Path],
        accepts: RecordingFilter | None,
        run: IngestRun,
        stop: threading.Event,
    ) -> None:
        """The first pass over *paths*, then each changed recording again, until *stop*."""
        roots = [WatchRoot.of(path) for path in paths]
        seen = run.seen
        said: dict[str, str] = {}
        watched = Tally()
        started = time.monotonic()

        def first_pass() -> None:
            tally = self._first_pass(self._files(paths, accepts, run), run, stop, said=said)
            if tally.new_items and (warning := refresh_statistics()):
                self.stderr.write(warning)
            if not stop.is_set():
                shown = ", ".join(str(path) for path in paths)
                self.stdout.write(f"watching {shown} for changes (Ctrl-C to stop)")
            self._flush()

        def changed(recordings: list[tuple[Path, bool]]) -> None:
            # Hours may pass between changes: as a request would, drop a connection that
            # broke (a database restarted) or outlived CONN_MAX_AGE. Not inside a test's
            # transaction, which closing would end.
            if not connection.in_atomic_block:
                close_old_connections()
            self._say_links(run.links)
            for path, named in recordings:
                if stop.is_set():
                    return
                if accepts is not None and not named and not accepts(path):
                    continue
                mark = seen.key(path)
                state = seen.plan(path, mark)
                if state is None:
                    continue  # e.g. a change the first pass already read
                prefix = f"[{time.strftime('%H:%M:%S')}] "
                if self._ingest(path, named, prefix, watched, run, said, state):
                    seen.remember(path, mark, state)
                else:  # read again on its next change, however it failed
                    seen.forget(path)
            self._flush()

        try:
            follow(roots, stop=stop, on_ready=first_pass, on_changes=changed, links=run.links)
        except WatchError as error:
            raise CommandError(str(error)) from None
        failed = f", {watched.failed} could not be ingested" if watched.failed else ""
        self.stdout.write(
            f"stopped watching after {time.monotonic() - started:.1f}s: "
            f"{watched.ingested} changed recordings ingested{failed}, "
            f"{watched.new_items} new items while watching"
        )


def _check_flags(
    paths: list[Path], *, agents: bool, watch: bool, rebuild: bool, rebuild_all: bool
) -> None:
    """Refuse flags that do not go together, before anything is read."""
    if rebuild_all and not rebuild:
        raise CommandError("--all goes with --rebuild: manage.py ingest --rebuild --all")
    if watch and rebuild:
        raise CommandError(
            "--watch follows recordings as they grow; re-derive sessions first with "
            "manage.py ingest --rebuild, then watch"
        )
    if not paths and not rebuild_all and not agents:
        raise CommandError("give the recordings to ingest: manage.py ingest PATH... (or --agents)")


def _size(text: str) -> int:
    try:
        return size_in_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
