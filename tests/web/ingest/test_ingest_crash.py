"""A `manage.py ingest` killed with SIGKILL leaves no blobs behind for good: the next
ingest, or `blobs gc`, removes those its journal lists that no row references, and never
a blob that agents or the CLI wrote straight into the store
(docs/store.md#blobs-of-a-killed-ingest).

The journal's rules are checked in this process first. Then real processes on real
recordings (tests/fixtures/real), each with a data folder and a database of its own: the
data folder's SQLite file, or with DATABASE_URL a PostgreSQL database copied from a
migrated template. A process is killed once the blob folder holds a given number of blob
files, found by polling the folder."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from blobviewer.ingest.errors import IngestError
from blobviewer.ingest.journal import journal_folder
from blobviewer.ingest.sessions import ingest_session
from core.content import Text
from core.store import FsBlobStore
from core.store.errors import BlobIOError
from web.ingest_process import REAL, ROOT, START_BOUND_SECONDS, command_env
from web.records import header, tool_result_item, user_item

# The recordings every run ingests: the real ones, without the notes beside them.
RECORDINGS = sorted(path for path in REAL.iterdir() if path.name != "README.md")
JOURNALS = "ingest-journal"


# --- the journal, in this process ------------------------------------------------------------

OUTPUTS = ["".join(f"line {n} of output {k}\n" for n in range(100)) for k in range(5)]


def records() -> list[dict[str, Any]]:
    return [user_item(1, "go")] + [
        tool_result_item(seq, output, call_id=f"c{seq}") for seq, output in enumerate(OUTPUTS, 2)
    ]


def journal_lines() -> list[list[str]]:
    """The lines of each journal in the data folder."""
    folder = journal_folder()
    paths = sorted(folder.iterdir()) if folder.is_dir() else []
    return [path.read_text().splitlines() for path in paths]


@pytest.mark.django_db
def test_each_blob_id_is_journaled_before_its_blob_exists(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
):
    put_sync = FsBlobStore.put_sync
    seen = []

    def journaled_first(self: FsBlobStore, blob_id: Any, content: Any) -> bool:
        (lines,) = journal_lines()
        assert lines[-1] == str(blob_id)
        assert not self.exists_sync(blob_id)
        seen.append(blob_id)
        return put_sync(self, blob_id, content)

    monkeypatch.setattr(FsBlobStore, "put_sync", journaled_first)
    with django_capture_on_commit_callbacks(execute=True):
        result = ingest_session(header(), records(), source_path="/run.jsonl", store=store)
        # Until the transaction commits (here: the test's own, captured), the journal stays.
        ((first_line, *ids),) = journal_lines()
        assert ids == [str(blob_id) for blob_id in result.stored_blobs]
        assert '"pid"' in first_line

    assert seen == list(result.stored_blobs) and len(seen) == len(OUTPUTS)
    assert journal_lines() == []  # committed: every blob it listed is referenced


@pytest.mark.django_db
def test_an_ingest_that_stores_no_blob_keeps_no_journal(store: FsBlobStore):
    ingest_session(header(), [user_item(1, "hello")], source_path="/run.jsonl", store=store)

    assert not journal_folder().exists()


@pytest.mark.django_db
def test_a_failed_ingest_discards_its_blobs_and_then_its_journal(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch
):
    put_sync = FsBlobStore.put_sync
    calls = []

    def full_after_two(self: FsBlobStore, blob_id: Any, content: Any) -> bool:
        calls.append(blob_id)
        if len(calls) > 2:
            raise BlobIOError("No space left on device")
        return put_sync(self, blob_id, content)

    monkeypatch.setattr(FsBlobStore, "put_sync", full_after_two)
    with pytest.raises(IngestError):
        ingest_session(header(), records(), source_path="/run.jsonl", store=store)

    assert list(store.ids_sync()) == []
    assert journal_lines() == []


# --- killed processes -------------------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    """Where a site's rows go: "" for the data folder's own SQLite file, or a PostgreSQL
    URL."""

    url: str = ""

    @property
    def env(self) -> dict[str, str]:
        return {"DATABASE_URL": self.url} if self.url else {}


@dataclass(frozen=True)
class Site:
    """A data folder and its database, as `manage.py` sees them."""

    data: Path
    database: Database

    def manage(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *map(str, args)],
            cwd=ROOT,
            env=command_env(self.data, **self.database.env),
            capture_output=True,
            text=True,
            timeout=START_BOUND_SECONDS,
            check=False,
        )

    def ingest(self) -> subprocess.CompletedProcess[str]:
        result = self.manage("ingest", *RECORDINGS)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result

    def start_ingest(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "manage.py", "ingest", *map(str, RECORDINGS)],
            cwd=ROOT,
            env=command_env(self.data, **self.database.env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    @property
    def blobs(self) -> Path:
        return self.data / "blobs"

    def blob_files(self) -> set[uuid.UUID]:
        """The ids of the blob files in the store folder."""
        found = set()
        for entry in os.scandir(self.blobs):
            stem, _, suffix = entry.name.rpartition(".")
            if suffix in ("txt", "json") and not entry.name.startswith("."):
                found.add(uuid.UUID(stem))
        return found

    def referenced(self) -> set[uuid.UUID]:
        """The blobs some item references (BlobRef rows)."""
        return {uuid.UUID(str(row[0])) for row in self.rows("blobviewer_blobref", "blob_id")}

    def catalogued(self) -> set[uuid.UUID]:
        """The blobs the catalog has a row for."""
        return {uuid.UUID(str(row[0])) for row in self.rows("blobviewer_blob", "id")}

    def rows(self, table: str, column: str) -> list[tuple[object, ...]]:
        query = f"SELECT DISTINCT {column} FROM {table}"  # noqa: S608 - our own names
        if self.database.url:
            with psycopg.connect(self.database.url) as connection:
                return connection.execute(query).fetchall()
        uri = f"file:{self.data / 'db.sqlite3'}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=30)) as connection:
            return connection.execute(query).fetchall()

    def journaled(self) -> set[uuid.UUID]:
        """The blob ids the ingest journals in the data folder list."""
        folder = self.data / JOURNALS
        if not folder.is_dir():
            return set()
        ids = set()
        for path in folder.iterdir():
            for line in path.read_text().splitlines():
                try:
                    ids.add(uuid.UUID(line))
                except ValueError:
                    continue  # the journal's header line
        return ids

    def journals(self) -> list[str]:
        folder = self.data / JOURNALS
        return sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []


# --- databases -----------------------------------------------------------------------------


def _maintenance(parts: SplitResult) -> psycopg.Connection:
    try:
        return psycopg.connect(urlunsplit(parts._replace(scheme="postgresql")), autocommit=True)
    except psycopg.OperationalError:
        url = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
        return psycopg.connect(url, autocommit=True)


class Databases:
    """Fresh migrated databases, quickly: a template migrated once (`manage.py migrate`),
    copied for each site (SQLite: the file; PostgreSQL: CREATE DATABASE ... TEMPLATE)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        url = os.environ.get("DATABASE_URL", "").strip()
        self.parts = urlsplit(url) if url else None
        self.made: list[str] = []
        template = Site(folder / "template", self._new_database("template"))
        (template.data / "blobs").mkdir(parents=True)
        migrated = template.manage("migrate", "--no-input")
        assert migrated.returncode == 0, migrated.stderr
        self.template = template

    def _new_database(self, label: str, template: str | None = None) -> Database:
        if self.parts is None:
            return Database()
        base = self.parts.path.lstrip("/") or "blobviewer"
        name = f"{base}_crash_{label}_{uuid.uuid4().hex[:8]}"
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        with _maintenance(self.parts) as connection:
            connection.execute(statement)
        self.made.append(name)
        return Database(urlunsplit(self.parts._replace(scheme="postgresql", path=f"/{name}")))

    def site(self, label: str) -> Site:
        data = self.folder / f"{label}-{uuid.uuid4().hex[:6]}"
        (data / "blobs").mkdir(parents=True)
        (data / "sessions").mkdir()
        if self.parts is None:
            shutil.copyfile(self.template.data / "db.sqlite3", data / "db.sqlite3")
            return Site(data, Database())
        template = urlsplit(self.template.database.url).path.lstrip("/")
        return Site(data, self._new_database(label, template))

    def drop(self) -> None:
        if self.parts is None:
            return
        with _maintenance(self.parts) as connection:
            for name in self.made:
                connection.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Databases]:
    made = Databases(tmp_path_factory.mktemp("crash"))
    try:
        yield made
    finally:
        made.drop()


@pytest.fixture(scope="module")
def clean_run(databases: Databases) -> set[uuid.UUID]:
    """The blob files a run that nobody killed makes of the recordings."""
    site = databases.site("clean")
    site.ingest()
    files = site.blob_files()
    assert files == site.referenced()
    assert not site.journals()
    return files


# --- killing ingest -------------------------------------------------------------------------


def killed_after(site: Site, blob_files: int) -> set[uuid.UUID]:
    """Start ingest and SIGKILL it once the store holds *blob_files* blob files or more;
    the blob files it left that no row references. Raises when it finished first."""
    process = site.start_ingest()
    try:
        while process.poll() is None:
            if len(site.blob_files()) >= blob_files:
                os.kill(process.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=START_BOUND_SECONDS)
    assert process.returncode == -signal.SIGKILL, "ingest finished before it could be killed"
    return site.blob_files() - site.referenced()


def killed_with_orphans(databases: Databases, label: str, blob_files: int) -> Site:
    """A site whose ingest was killed while blobs it had written were not committed yet
    (a kill that lands just after a commit leaves none: then a little later again)."""
    for attempt in range(8):
        site = databases.site(label)
        if killed_after(site, blob_files + 3 * attempt):
            return site
    pytest.fail(f"no kill after {blob_files} blob files left a blob no row references")


@pytest.mark.parametrize("share", [0.02, 0.25, 0.5, 0.75, 0.95])
def test_after_a_kill_and_a_rerun_the_store_holds_what_a_clean_run_makes(
    databases: Databases, clean_run: set[uuid.UUID], share: float
):
    site = killed_with_orphans(databases, "killed", max(1, int(len(clean_run) * share)))
    orphans = site.blob_files() - site.referenced()
    # Each blob the killed run wrote was journaled before it existed.
    assert orphans <= site.journaled()

    result = site.ingest()

    files = site.blob_files()
    assert len(files) == len(clean_run), (
        f"{len(files)} blob files after the kill (with {len(orphans)} orphans) and a "
        f"re-run; a clean run makes {len(clean_run)}"
    )
    assert files == site.referenced()
    assert not files & orphans
    assert not site.journals()
    noun = "blob" if len(orphans) == 1 else "blobs"
    assert f"Removed {len(orphans)} {noun} that killed ingests wrote" in result.stdout


def test_gc_after_a_kill_removes_its_orphans_and_keeps_blobs_agents_wrote(
    databases: Databases, clean_run: set[uuid.UUID]
):
    site = databases.site("agent")
    agents = FsBlobStore(site.blobs)
    by_agent = agents.store_sync(Text("written by an agent, no session mentions it\n" * 40))
    by_cli = subprocess.run(
        [sys.executable, "-m", "core", "store", "--dir", str(site.blobs), str(RECORDINGS[0])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    straight = {by_agent} | (site.blob_files() - {by_agent})
    assert len(straight) == 2, by_cli.stdout
    for attempt in range(8):
        orphans = killed_after(site, len(clean_run) // 2 + 3 * attempt) - straight
        if orphans:
            break
    else:
        pytest.fail("no kill left a blob no row references")
    # `blobs index` lists them (the store has them, no row does), as it lists the agent's.
    assert site.manage("blobs", "index").returncode == 0
    assert orphans | straight <= site.catalogued()

    gc = site.manage("blobs", "gc")

    assert gc.returncode == 0, gc.stderr
    files = site.blob_files()
    assert straight <= files
    assert not files & orphans
    assert files - straight == site.referenced()
    assert not site.catalogued() & orphans
    assert not site.journals()
    noun = "blob" if len(orphans) == 1 else "blobs"
    assert f"Removed {len(orphans)} {noun} that killed ingests wrote" in gc.stdout

    site.ingest()

    assert len(site.blob_files()) == len(clean_run) + len(straight)
    assert straight <= site.blob_files()
