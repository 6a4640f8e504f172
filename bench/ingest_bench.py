"""How fast `manage.py ingest` records sessions, on SQLite and PostgreSQL
(docs/benchmarks.md#ingest). Not a test: run it by hand or with `make bench`.

    python bench/ingest_bench.py [--items 1000,10000,100000] [--databases sqlite,postgresql]
                                 [--profile N]

The real recordings in `tests/fixtures/real`, those an importer reads, are copied into a
temporary folder again and again until there are --items items: each copy is a distinct
session (its UUIDs rewritten, and for a recording whose session id is derived from its
opening messages, a marker in its first message). Each size is then
ingested by `manage.py ingest` in a fresh subprocess into an empty database: SQLite in a
temporary data folder and, when DATABASE_URL names PostgreSQL or a server answers on
127.0.0.1:5432, a PostgreSQL database that the bench creates and drops.

Printed for each run: items/s of the ingest (files read and parsed, outputs promoted and
stored as blobs, every row written), the ratio to the goal of 10,000 items/s, and the
linearity (items/s at the largest size over items/s at the smallest), and items per
CPU-second, which a busy machine changes less: this process's CPU and, for a PostgreSQL
server on this machine, that of the server process doing the database's work (read from
its /proc). Search indexing of
item and blob text, which ingest runs after each session's transaction, is timed apart and
printed in MB/s beside it (and in MB per CPU-second, server included); the time given
as "all" includes it. A phase split says where
the ingest time went: reading and parsing the recordings, promotion (summaries included),
writing blob files (with whatever core writes beside them), and the database.

The ingest's CPU is split between this process and the PostgreSQL server, and each phase
shows its CPU beside its time.
Before each run the bench waits until creating a file costs what it does on a quiet disk
(see settle), and prints that cost: files deleted just before a run (by the bench's
previous run, or by a test suite) must not be measured. The bench deletes nothing until
it ends.

After each run the bench checks what was recorded: one session per file, every item and
every stored blob in the database, a search chunk for every item with text and a search
state for every blob. The temporary folders and databases are removed afterwards.
--profile N instead runs one ingest of N items on each database under cProfile and prints
the functions that took the most time.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.store import TEMP_PREFIX  # noqa: E402 - found through the line above

GOAL = 10_000  # items/s: what ingest must keep up with (docs/benchmarks.md#ingest)
DEFAULT_SIZES = "1000,10000,100000"
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
REPLICA_NAMESPACE = uuid.UUID("8a6f2c1e-3b7d-4e59-a0c4-5d1e9f7b2c30")
PG_LOCAL = "postgres://postgres@127.0.0.1:5432/postgres"
QUIET_CREATE = 60e-6  # seconds to create a small file, well above a quiet disk's cost


# --- the recordings, replicated ------------------------------------------------------------


class Recording:
    """One real recording an importer reads: its bytes, format and item count."""

    def __init__(self, path: Path, data: bytes, kind: str, items: int) -> None:
        self.path, self.data, self.kind, self.items = path, data, kind, items


def readable_recordings(fixtures: Path) -> list[Recording]:
    """The recordings under *fixtures* that some importer reads (others are passed over)."""
    from blobviewer.ingest.importers import (
        OUR_FORMAT,
        RecordingError,
        UnknownFormat,
        load_sniffed,
        sniff,
    )
    from core.agent.session_log import SessionLogError, parse_session_log

    found = []
    for path in sorted(fixtures.rglob("*")):
        if not path.is_file() or path.suffix not in (".jsonl", ".json", ".traj"):
            continue
        data = path.read_bytes()
        try:
            kind, document = sniff(path, data)
            if kind == OUR_FORMAT:
                items = len(parse_session_log(data, path).records)
            else:
                items = len(load_sniffed(path, data, kind, document).records)
        except (UnknownFormat, RecordingError, SessionLogError):
            continue
        if items:
            found.append(Recording(path, data, kind, items))
    return found


def replica_bytes(recording: Recording, replica: int) -> bytes:
    """*recording* as a distinct session: every UUID in it replaced (the same way
    throughout, so its references still agree), and for a whole-document recording, whose
    session id is derived from its opening, a marker at the start of its first message."""

    def rename(match: re.Match[str]) -> str:
        return str(uuid.uuid5(REPLICA_NAMESPACE, f"{replica}:{match.group().lower()}"))

    text = UUID.sub(rename, recording.data.decode("utf-8"))
    if recording.path.suffix == ".jsonl":
        # A session id that is no UUID (Codex's, say) is in the first record: renamed
        # wherever it appears.
        for name in _ids_in(json.loads(text.partition("\n")[0])):
            text = text.replace(json.dumps(name), json.dumps(f"{name}-replica-{replica}"))
        return text.encode()
    document = json.loads(text)
    renamed = False
    if isinstance(document, dict):
        for key in ("id", "sessionId", "session_id"):
            value = document.get(key)
            if isinstance(value, str) and not UUID.fullmatch(value):
                document[key] = f"{value}-replica-{replica}"
                renamed = True
    if not _mark_first_message(document, f"[replica {replica}] ") and not renamed:
        raise SystemExit(f"{recording.path.name}: cannot make a distinct copy of it")
    return json.dumps(document, ensure_ascii=False).encode()


def _ids_in(value: Any) -> list[str]:
    """The string values of keys that name a session (id, sessionId, session_id) in
    *value*, at any depth, that are not UUIDs."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("id", "sessionId", "session_id") and isinstance(item, str):
                if not UUID.fullmatch(item):
                    found.append(item)
            else:
                found += _ids_in(item)
    elif isinstance(value, list):
        for item in value:
            found += _ids_in(item)
    return found


def _mark_first_message(document: Any, marker: str) -> bool:
    messages = document
    if isinstance(document, dict):
        messages = document.get("messages") or document.get("history") or []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = marker + content
            return True
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    block["text"] = marker + block["text"]
                    return True
    return False


def replicate(recordings: list[Recording], items: int, folder: Path) -> tuple[int, int]:
    """Copies of *recordings*, in turn, into *folder* until they hold at least *items*
    items; returns (files, items) written."""
    folder.mkdir(parents=True)
    files = written = replica = 0
    while written < items:
        for recording in recordings:
            if written >= items:
                break
            name = f"{replica:05d}-{recording.path.name}"
            (folder / name).write_bytes(replica_bytes(recording, replica))
            files += 1
            written += recording.items
        replica += 1
    return files, written


def check_distinct(recordings: list[Recording]) -> None:
    """Two copies of each recording are two sessions (else the bench measures nothing)."""
    from blobviewer.ingest.importers import OUR_FORMAT, load_sniffed, sniff
    from core.agent.session_log import parse_session_log

    for recording in recordings:
        ids = set()
        for replica in (0, 1):
            data = replica_bytes(recording, replica)
            kind, document = sniff(recording.path, data)
            if kind == OUR_FORMAT:
                ids.add(str(parse_session_log(data, recording.path).header.get("id")))
            else:
                ids.add(str(load_sniffed(recording.path, data, kind, document).header["id"]))
        if len(ids) != 2:
            raise SystemExit(f"{recording.path.name}: its copies are one session")


# --- databases -----------------------------------------------------------------------------


def postgres_server() -> str | None:
    """The URL of a PostgreSQL server to create bench databases on, or None."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if url.startswith(("postgres://", "postgresql://", "pgsql://")):
        return url
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", 5432), 1):
        return PG_LOCAL
    return None


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextlib.contextmanager
def postgres_database(server: str, name: str) -> Iterator[str]:
    """A fresh, empty database *name* on *server*, dropped afterwards; yields its URL."""
    import psycopg

    admin = _with_database(server, "postgres")
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(server, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- one run, in a subprocess ----------------------------------------------------------------


class Timers:
    """Seconds spent in wrapped functions (outermost calls only, so nesting counts once)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}  # this process's CPU time, likewise
        self._depth: dict[str, int] = {}

    def wrap(self, owner: Any, attribute: str, phase: str) -> None:
        original: Callable[..., Any] | None = getattr(owner, attribute, None)
        if original is None:  # not there (any more): nothing to time
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = self._depth.get(phase, 0)
            self._depth[phase] = depth + 1
            started, cpu_started = time.perf_counter(), time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                self._depth[phase] = depth
                if depth == 0:
                    spent = time.perf_counter() - started
                    self.seconds[phase] = self.seconds.get(phase, 0.0) + spent
                    cpu = time.process_time() - cpu_started
                    self.cpu[phase] = self.cpu.get(phase, 0.0) + cpu

        setattr(owner, attribute, timed)


def child(folder: Path, data: Path, profile: bool) -> None:
    """Ingest *folder* into a fresh database (DATABASE_URL, else SQLite in *data*); print
    the result as one JSON line."""
    os.environ["BLOBVIEWER_DATA"] = str(data)
    os.environ["DJANGO_SETTINGS_MODULE"] = "blobviewer.settings"
    import django

    django.setup()
    import io

    from django.core.management import CommandError, call_command
    from django.db import connection

    import blobviewer.ingest.promotion
    import blobviewer.ingest.recording_files
    import blobviewer.ingest.sessions
    import core.promotion
    from core.store import FsBlobStore

    call_command("migrate", verbosity=0)
    timers = Timers()
    ingest_server = server_cpu(connection)
    # Search indexing is measured apart, after the ingest (which skips it here); the rest
    # is the ingest proper, in phases.
    index_session = blobviewer.ingest.sessions.index_session
    blobviewer.ingest.sessions.index_session = lambda *args, **kwargs: None
    timers.wrap(blobviewer.ingest.sessions, "open_recording", "read")
    timers.wrap(blobviewer.ingest.recording_files, "open_recording", "read")
    timers.wrap(blobviewer.ingest.promotion, "promote", "promote")
    timers.wrap(blobviewer.ingest.sessions, "catalog_blobs", "blob facts and rows")
    timers.wrap(blobviewer.ingest.promotion, "summarize", "promote")
    timers.wrap(core.promotion, "summarize", "promote")
    timers.wrap(FsBlobStore, "store_sync", "blob files")
    timers.wrap(FsBlobStore, "discard_sync", "blob files")

    out, err = io.StringIO(), io.StringIO()
    files = sorted(str(path) for path in folder.iterdir())
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
    started, own_started = time.perf_counter(), time.process_time()
    cpu_started = own_started + _children_cpu()
    server_started = ingest_server() if ingest_server else 0.0
    try:
        call_command("ingest", *files, stdout=out, stderr=err)
    except CommandError as error:  # some files failed: the checks below say which
        err.write(f"{error}\n")
    finally:
        total = time.perf_counter() - started
        # This process and any child processes (reaped once the command is done).
        own_cpu = time.process_time() - own_started
        cpu = own_cpu + _children_cpu() + own_started - cpu_started
        server_cpu_spent = ingest_server() - server_started if ingest_server else None
        if profiler is not None:
            import pstats

            profiler.disable()
            stats = pstats.Stats(profiler, stream=sys.stderr)
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(40)
    from blobviewer.data_dir import blob_store
    from blobviewer.models import Session

    server = server_cpu(connection)
    search_started, search_cpu_started = time.perf_counter(), time.process_time()
    search_server_started = server() if server else 0.0
    store = blob_store()
    for session_id in Session.objects.values_list("id", flat=True):
        index_session(session_id, store=store)
    search = time.perf_counter() - search_started
    search_cpu = time.process_time() - search_cpu_started
    result = {
        "seconds": total + search,
        "cpu": cpu + search_cpu,
        "own_cpu": own_cpu + search_cpu,
        "phases": {**timers.seconds, "search": search},
        "phase_cpu": timers.cpu,
        "search_cpu": search_cpu,
        # PostgreSQL's work is done by its server process, which this one does not count.
        "server_cpu": server_cpu_spent,
        "search_server_cpu": server() - search_server_started if server else 0.0,
        "vendor": connection.vendor,
    }
    result.update(_recorded(len(files), out.getvalue(), err.getvalue()))
    print(json.dumps(result))


def server_cpu(connection: Any) -> Callable[[], float] | None:
    """A function giving the CPU seconds that the PostgreSQL server process serving
    *connection* has used, when the server runs on this machine (its /proc is readable);
    None for SQLite (its work is this process's) or a server elsewhere."""
    pid = _backend_pid(connection)
    return None if pid is None else _cpu_of(pid, children=False)


def _backend_pid(connection: Any) -> int | None:
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    return pid


def _cpu_of(pid: int, *, children: bool) -> Callable[[], float] | None:
    """A function giving process *pid*'s CPU seconds (utime + stime), or with *children*
    those of its ended children (cutime + cstime); None when its /proc is not readable."""
    stat = Path(f"/proc/{pid}/stat")
    ticks = os.sysconf("SC_CLK_TCK")
    first = 13 if children else 11  # counted from the field after the command's name

    def read() -> float:
        fields = stat.read_text().rpartition(")")[2].split()
        return (int(fields[first]) + int(fields[first + 1])) / ticks

    try:
        read()
    except (OSError, ValueError, IndexError):
        return None
    return read


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _recorded(files: int, out: str, err: str) -> dict[str, Any]:
    """What the ingest recorded, and whether it is everything it should have recorded."""
    from django.db.models import Sum

    from blobviewer.data_dir import blob_store
    from blobviewer.models import Blob, BlobRef, Item, SearchChunk, SearchedBlob, Session
    from core.content import utf8_size

    stored = set(blob_store().ids_sync())
    blob_ids = set(Blob.objects.values_list("id", flat=True))
    searched = set(SearchedBlob.objects.values_list("blob_id", flat=True))
    items = Item.objects.count()
    chunked = SearchChunk.objects.filter(item__isnull=False).values("item_id").distinct().count()
    with_text = Item.objects.exclude(text="", output="", tool_calls=[]).count()
    item_bytes = sum(
        utf8_size(text) + utf8_size(output)
        for text, output in Item.objects.values_list("text", "output").iterator(chunk_size=2000)
    )
    blob_bytes = SearchedBlob.objects.aggregate(total=Sum("indexed_bytes"))["total"] or 0
    progress = [line for line in out.splitlines() if line.startswith("[")]
    problems = []
    if err.strip():
        problems.append(f"errors: {err.strip()[:500]}")
    if len(progress) != files or not all(f"/{files}]" in line for line in progress):
        problems.append(f"{len(progress)} progress lines for {files} files")
    if f"{files} of {files} files ingested" not in out:
        problems.append("not every file was ingested: " + out.strip().splitlines()[-1])
    sessions = Session.objects.count()
    if sessions != files:
        problems.append(f"{sessions} sessions from {files} files")
    if stored != blob_ids:
        problems.append(f"{len(stored)} blobs stored, {len(blob_ids)} blob rows")
    if searched != blob_ids:
        problems.append(f"{len(blob_ids - searched)} blobs not indexed for search")
    if chunked != with_text:
        problems.append(f"{with_text - chunked} items not indexed for search")
    return {
        "files": files,
        "sessions": sessions,
        "items": items,
        "blobs": len(stored),
        "blob_bytes_stored": sum((blob_store().size_sync(b) for b in stored), 0),
        "blob_refs": BlobRef.objects.count(),
        "search_chunks": SearchChunk.objects.count(),
        "search_bytes": item_bytes + blob_bytes,
        "problems": problems,
    }


def settle(folder: Path, *, limit: float = 420.0) -> float:
    """Wait until creating a file in *folder* costs what it does on a quiet disk; return
    the cost per file then (seconds). ext4 without a journal (this machine's disk) does
    not reuse an inode freed in the last minute, and finds that out again on every create
    in its block group, inode by inode from the group's start (`recently_deleted` in the
    kernel): for a minute after a few thousand files there were deleted, each new file
    costs up to 0.7 ms of CPU here instead of 30 µs. Whatever deleted files just before
    the bench (a test run, an earlier bench) would be measured as the ingest's own cost,
    so the bench deletes nothing until it ends and probes the very folder the run writes
    its blobs to (each folder's files go to its own group), waiting until the cost is low
    (a freed inode is reused after 60 s, or 6 minutes while its table block is not
    written out yet). The probe files are named as the store names a file it is still
    writing, which it ignores."""
    os.sync()
    folder.mkdir(parents=True, exist_ok=True)
    started, probes = time.monotonic(), itertools.count()
    while True:
        begun, probe = time.perf_counter(), next(probes)
        for n in range(100):
            (folder / f"{TEMP_PREFIX}settle-{probe}-{n}").write_bytes(b"x" * 2048)
        cost = (time.perf_counter() - begun) / 100
        waited = time.monotonic() - started
        if cost < QUIET_CREATE or waited > limit:
            return cost
        time.sleep(1.0)


def run(folder: Path, database: str | None, *, profile: bool = False) -> dict[str, Any]:
    """One ingest of *folder* in a fresh subprocess; SQLite unless *database* is a URL."""
    # Removed with the rest when the bench ends, not now: see settle.
    data = tempfile.mkdtemp(prefix="data-", dir=folder.parent)
    create_cost = settle(Path(data) / "blobs")
    env = {**os.environ, "DEBUG": "false", "SECRET_KEY": "ingest-bench-" + "x" * 50}
    env.pop("DATABASE_URL", None)
    if database:
        env["DATABASE_URL"] = database
    command = [sys.executable, __file__, "--child", str(folder), "--data", data]
    if profile:
        command.append("--child-profile")
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if profile:
        sys.stdout.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"the ingest run failed:\n{done.stdout}\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["create_cost"] = create_cost
    return result


# --- the report ------------------------------------------------------------------------------


def ingest_rate(result: dict[str, Any]) -> float:
    """Items a second of the ingest proper (search indexing left out)."""
    return result["items"] / (result["seconds"] - result["phases"].get("search", 0.0))


def ingest_cpu(result: dict[str, Any]) -> float:
    """CPU seconds of the ingest proper: this process, its children and, for PostgreSQL on
    this machine, the server process that did the database's work."""
    return result["cpu"] - result["search_cpu"] + (result.get("server_cpu") or 0.0)


def cpu_rate(result: dict[str, Any]) -> float:
    """Items per CPU-second of the ingest proper (see ingest_cpu)."""
    return result["items"] / ingest_cpu(result)


def print_phases(result: dict[str, Any], ingest: float) -> None:
    """Where the time of an ingest in one process went."""
    phases = {k: v for k, v in result["phases"].items() if k != "search"}
    rest = ingest - sum(phases.values())
    phase_cpu = result.get("phase_cpu", {})
    split = ", ".join(
        f"{phase} {seconds / ingest:.0%}"
        + (f" (CPU {phase_cpu[phase] / ingest:.0%})" if phase in phase_cpu else "")
        for phase, seconds in [*sorted(phases.items()), ("database and the rest", rest)]
    )
    print(f"{'':>8} the ingest's time: {split}")


def report(name: str, results: list[dict[str, Any]]) -> int:
    """Print one database's runs; returns how many of them failed a check."""
    print(f"\n{name}")
    print(
        f"{'items':>8} {'files':>6} {'blobs':>6} {'all':>7} {'search':>7} {'ingest':>7} "
        f"{'items/s':>8} {'goal':>6} {'CPU':>7} {'items/CPU-s':>11}   search indexing"
    )
    failures = 0
    for result in results:
        search = result["phases"].get("search", 0.0)
        ingest = result["seconds"] - search
        rate = ingest_rate(result)
        cpu = ingest_cpu(result)
        mb = result["search_bytes"] / 1e6
        search_cpu = result["search_cpu"] + result.get("search_server_cpu", 0.0)
        print(
            f"{result['items']:>8,} {result['files']:>6,} {result['blobs']:>6,} "
            f"{result['seconds']:>6.1f}s {search:>6.1f}s {ingest:>6.1f}s {rate:>8,.0f} "
            f"{rate / GOAL:>5.2f}x {cpu:>6.1f}s {result['items'] / cpu:>11,.0f}   "
            f"{mb / search if search else 0:>5.2f} MB/s ({mb:,.1f} MB of item and blob text; "
            f"{mb / search_cpu if search_cpu else 0:.2f} MB per CPU-second)"
        )
        own = result["own_cpu"] - result["search_cpu"]
        split = f"this process {own:.1f}s"
        if children := result["cpu"] - result["own_cpu"]:
            split += f", its child processes {children:.1f}s"
        if result.get("server_cpu") is not None:
            split += f", the PostgreSQL server {result['server_cpu']:.1f}s"
        print(f"{'':>8} the ingest's CPU: {split}")
        quiet = "" if result["create_cost"] < QUIET_CREATE else ": NOT QUIET, slower than usual"
        print(
            f"{'':>8} creating a file cost {result['create_cost'] * 1e6:.0f} µs just before "
            f"the run (see settle){quiet}"
        )
        print_phases(result, ingest)
        for problem in result["problems"]:
            failures += 1
            print(f"{'':>8} CHECK FAILED: {problem}")
    if len(results) > 1:
        first, last = results[0], results[-1]
        print(
            f"linearity: {ingest_rate(last) / ingest_rate(first):.2f} (items/s at "
            f"{last['items']:,} items over items/s at {first['items']:,}; 1.00 is linear), "
            f"{cpu_rate(last) / cpu_rate(first):.2f} in items per CPU-second"
        )
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", default=DEFAULT_SIZES, help="comma-separated sizes")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--profile", type=int, metavar="N", help="profile one run of N items")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.child_profile)
        return 0

    fixtures = REPO / "tests" / "fixtures" / "real"
    recordings = readable_recordings(fixtures)
    if not recordings:
        print(f"no recordings an importer reads in {fixtures}", file=sys.stderr)
        return 1
    check_distinct(recordings)
    sizes = [args.profile] if args.profile else [int(n) for n in args.items.split(",")]
    wanted = {name.strip() for name in args.databases.split(",")}
    server = postgres_server() if "postgresql" in wanted else None
    databases: list[tuple[str, str | None]] = []
    if "sqlite" in wanted:
        databases.append(("SQLite", None))
    if server:
        databases.append(("PostgreSQL", server))
    per_set = sum(recording.items for recording in recordings)
    print(
        f"ingest benchmark: {len(recordings)} real recordings ({per_set:,} items a set: "
        + ", ".join(f"{r.path.name} {r.items}" for r in recordings)
        + f"), copied up to {', '.join(f'{n:,}' for n in sizes)} items; "
        f"goal {GOAL:,} items/s"
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    failures = 0
    work = Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    try:
        folders = {}
        for size in sizes:
            folders[size] = work / f"items-{size}"
            replicate(recordings, size, folders[size])
        for name, url in databases:
            results = []
            for size in sizes:
                if url is None:
                    results.append(run(folders[size], None, profile=bool(args.profile)))
                    continue
                database = f"ingest_bench_{os.getpid()}_{size}"
                with postgres_database(url, database) as database_url:
                    results.append(run(folders[size], database_url, profile=bool(args.profile)))
            failures += report(name, results)
        if "postgresql" in wanted and not server:
            print("\nPostgreSQL: no server (set DATABASE_URL, or run one on 127.0.0.1:5432)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
