"""`manage.py ingest` with nothing to do, answered before Django starts.

Starting Python and Django takes most of an ingest that finds every recording unchanged
(docs/recording.md#unchanged-files-are-not-read-again): settings, apps, models and the
migration graph, for a stat and one small read a file. So manage.py asks here first. For
the plain command (`ingest PATH…` and `--agents`, nothing else) on the data folder's own
SQLite database, with the default settings, this finds the recordings as the command does
(blobviewer.ingest.finding, blobviewer.ingest.agent_folders), marks each
(blobviewer.ingest.marks) and reads the database directly, read-only. When every file is as
its last ingest left it, with its sessions still there, it prints what the command would
have printed and the command does not run; in every other case (a file changed, grown or
new, a folder recording, a pending migration, a killed ingest's journal, any other flag or
setting) it prints nothing and Django runs the command as usual. It never writes.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import TextIO

from blobviewer.ingest.agent_folders import RecordingFilter, describe_search, find_agent_folders
from blobviewer.ingest.finding import Links, recording_paths
from blobviewer.ingest.importers.json_lines import DEFAULT_MAX_RECORD
from blobviewer.ingest.marks import DEFAULT_BLOB_BYTES, file_mark, ingest_shape, path_key
from blobviewer.ingest.progress import PassTally
from core.agent.policy import DEFAULT_POLICY
from core.redaction import redaction_enabled

BASE_DIR = Path(__file__).resolve().parents[2]
# Settings that change what an ingest stores or where: any of them set, Django decides.
_SHAPING = ("DATABASE_URL", "BLOBVIEWER_BLOBS", "BLOBVIEWER_SEARCH_BLOB_BYTES")
# The apps with migrations, and where their migrations are (their packages, not imported).
_MIGRATED = {
    "blobviewer": ("blobviewer", "migrations"),
    "admin": ("django", "contrib", "admin", "migrations"),
    "auth": ("django", "contrib", "auth", "migrations"),
    "contenttypes": ("django", "contrib", "contenttypes", "migrations"),
    "sessions": ("django", "contrib", "sessions", "migrations"),
    "axes": ("axes", "migrations"),
}
JOURNAL_FOLDER = "ingest-journal"  # blobviewer.ingest.journal's


def answered_before_django(args: list[str], *, out: TextIO = sys.stdout) -> bool:
    """Whether `ingest *args*` was answered here (its lines written to *out*)."""
    started = time.monotonic()
    paths = [Path(arg) for arg in args if arg != "--agents"]
    agents = "--agents" in args
    if any(arg.startswith("-") for arg in args if arg != "--agents") or not (paths or agents):
        return False
    if os.environ.get("DJANGO_SETTINGS_MODULE", "blobviewer.settings") != "blobviewer.settings":
        return False
    if any(os.environ.get(name, "").strip() for name in _SHAPING) or not _debug_or_keyed():
        return False
    data = Path(os.environ.get("BLOBVIEWER_DATA") or BASE_DIR / "data").resolve()
    database = data / "db.sqlite3"
    if not database.is_file() or _journals_left(data / JOURNAL_FOLDER):
        return False
    lines: list[str] = []
    accepts = None
    if agents:
        found = find_agent_folders()
        lines += describe_search(found)
        accepts = RecordingFilter(found)
        paths += [entry.path for entry in found if entry.exists]
    if not all(path.exists() for path in paths):
        return False
    links = Links(paths)
    files = recording_paths(paths, links=links)
    if links.unsaid_any():
        return False
    files = files if accepts is None else [f for f in files if f[1] or accepts(f[0])]
    shape = ingest_shape(
        DEFAULT_POLICY, DEFAULT_MAX_RECORD, DEFAULT_BLOB_BYTES, None, False, redaction_enabled()
    )
    try:
        if not _all_unchanged(database, [path for path, _ in files], shape):
            return False
    except sqlite3.Error:
        return False  # an older schema, a locked or damaged file: the command will say
    if not out.isatty():  # on a terminal, the command's progress line counts these
        for number, (path, _) in enumerate(files, start=1):
            lines.append(PassTally.unchanged_line(f"[{number}/{len(files)}] ", path))
    tally = PassTally(ingested=len(files), unchanged=len(files))
    lines.append(tally.summary(len(files), time.monotonic() - started))
    out.write("".join(f"{line}\n" for line in lines))
    out.flush()
    return True


def _debug_or_keyed() -> bool:
    """Whether settings would load as far as DEBUG and SECRET_KEY go: DEBUG on (the
    default), or off with a SECRET_KEY (else Django refuses to start, and says why)."""
    debug = os.environ.get("DEBUG", "").strip().lower()
    if debug in ("", "1", "true", "yes", "on"):
        return True
    return debug in ("0", "false", "no", "off") and bool(os.environ.get("SECRET_KEY"))


def _journals_left(folder: Path) -> bool:
    """Whether an ingest that was killed (or is running) left a journal to settle, or the
    folder cannot be listed (the command says so)."""
    try:
        return any(entry.is_file() for entry in os.scandir(folder))
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _all_unchanged(database: Path, files: list[Path], shape: str) -> bool:
    """Whether every file in *files* is as its last ingest with *shape* left it, every
    session made from it still there, in a database with every migration applied."""
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)
    try:
        if not _migrated(connection):
            return False
        sessions = dict(
            connection.execute(
                "SELECT source_path, count(*) FROM blobviewer_session GROUP BY source_path"
            )
        )
        for path in files:
            key, mark = path_key(path), file_mark(path)
            if key is None or mark is None:
                return False  # a folder recording, or a path no mark is kept for
            row = connection.execute(
                "SELECT device, inode, size, mtime_ns, edges, shape, sessions "
                "FROM blobviewer_ingestedfile WHERE path = ?",
                [key],
            ).fetchone()
            now = (mark.device, mark.inode, mark.size, mark.mtime_ns, mark.edges, shape)
            if row is None or tuple(row[:6]) != now or row[6] != sessions.get(str(path), 0):
                return False
        return True
    finally:
        connection.close()


def _migrated(connection: sqlite3.Connection) -> bool:
    """Whether every migration of every app is applied (else the command applies them)."""
    applied = set(connection.execute("SELECT app, name FROM django_migrations"))
    for app, parts in _MIGRATED.items():
        spec = importlib.util.find_spec(parts[0])
        if spec is None or not spec.submodule_search_locations:
            return False
        folder = Path(next(iter(spec.submodule_search_locations)), *parts[1:])
        try:
            names = [p.stem for p in folder.iterdir() if p.suffix == ".py" and p.stem[0].isdigit()]
        except OSError:
            return False
        if not names or any((app, name) not in applied for name in names):
            return False
    return True
