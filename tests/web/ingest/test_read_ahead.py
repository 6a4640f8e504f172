"""`manage.py ingest` reads the next recordings in a worker process while it writes the
current one (blobviewer.ingest.read_ahead, issue 9): what it records, what it says and the
errors it reports are those of reading each file in the command's own process."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection

from blobviewer.catalog.blobs import read_blob_facts
from blobviewer.ingest import read_ahead
from blobviewer.ingest import sessions as ingest
from blobviewer.ingest.read_ahead import RecordingReader
from blobviewer.ingest.sessions import IngestResult, PromotedAhead, ingest_recordings
from blobviewer.models import Blob, BlobRef, Item, Session
from core.store import FsBlobStore
from importers.recordings import FIXTURES
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

CLAUDE_SESSIONS = ("a7da6a22-facc-4fcd-8bab-f83c87862004", "8463c716-a2ea-4c14-9efa-87158ebd9f20")
BIG = "".join(f"line {n}: the tool printed this\n" for n in range(200))  # promoted
BLOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    """Every real recording that is a file, copied into one folder."""
    folder = tmp_path / "recordings"
    folder.mkdir()
    for path in sorted(FIXTURES.rglob("*")):
        recording = path.is_file() and path.suffix in (".jsonl", ".json", ".traj")
        if recording and "events" not in path.parts and path.name != "base_state.json":
            shutil.copyfile(path, folder / f"{len(list(folder.iterdir())):02d}-{path.name}")
    return folder


def recorded() -> dict[str, Any]:
    """What the database holds, blob ids aside (each ingest stores its own blobs), and
    the times of sessions without one (they sort by when they were ingested)."""

    def plain(rows: Any) -> list[str]:
        return sorted(BLOB_ID.sub("<id>", repr(row)) for row in rows)

    return {
        "sessions": plain(
            Session.objects.values_list(
                "id",
                "title",
                "model",
                "meta",
                "item_count",
                "blob_count",
                "step_count",
                "output_bytes_received",
                "output_bytes_in_history",
            )
        ),
        "items": plain(
            Item.objects.values_list(
                "session_id",
                "seq",
                "type",
                "at",
                "text",
                "tool_calls",
                "output",
                "digest",
                "output_bytes",
                "received_bytes",
            )
        ),
        "blobs": plain(
            Blob.objects.values_list(
                "kind", "size", "count", "preview", "made_by__seq", "made_by_title"
            )
        ),
        "refs": plain(BlobRef.objects.values_list("item__session_id", "item__seq", "blob__size")),
    }


def test_a_folder_read_ahead_records_what_reading_each_file_here_records(
    recordings: Path, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_in_worker = []
    take = RecordingReader.take

    def counted(self: RecordingReader, path: Path) -> Any:
        opened = take(self, path)
        read_in_worker.append(opened is not None)
        return opened

    monkeypatch.setattr(RecordingReader, "take", counted)
    monkeypatch.setattr(read_ahead, "cores", lambda: 2)
    out = StringIO()
    call_command("ingest", str(recordings), stdout=out, stderr=StringIO())
    ahead = recorded()
    lines = [BLOB_ID.sub("<id>", line) for line in out.getvalue().splitlines()[:-1]]

    Session.objects.all().delete()
    Blob.objects.all().delete()
    for path in sorted(recordings.iterdir()):
        ingest_recordings(path, store=store)

    assert recorded() == ahead
    assert len(read_in_worker) == len(list(recordings.iterdir())) > 5
    assert all(read_in_worker), read_in_worker
    # A line for each file (an evaluation output's, one per run), in order.
    numbers = [int(line.split("/")[0][1:]) for line in lines]
    assert numbers == sorted(numbers)
    assert set(numbers) == set(range(1, len(read_in_worker) + 1))
    assert connection.cursor().execute("SELECT 1").fetchone() == (1,)  # still ours


def test_a_damaged_file_read_ahead_is_reported_as_when_read_here(
    recordings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_ahead, "cores", lambda: 2)
    claude = next(
        p
        for p in recordings.iterdir()
        if p.name.endswith("a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl")
    )
    lines = claude.read_text().splitlines()
    claude.write_text("\n".join([*lines[:10], "{oops", *lines[10:]]) + "\n")
    (recordings / "99-unknown.json").write_text('{"neither": "a recording"}')

    def errors() -> list[str]:
        err = StringIO()
        with pytest.raises(CommandError):
            call_command("ingest", str(recordings), stdout=StringIO(), stderr=err)
        Session.objects.all().delete()
        return err.getvalue().splitlines()

    ahead = errors()
    monkeypatch.setattr(read_ahead, "cores", lambda: 1)  # everything read here
    here = errors()

    assert ahead == here
    assert f"{claude}:11: not JSON" in "\n".join(ahead)


def test_runs_it_cannot_send_back_are_read_here(tmp_path: Path, store: Any) -> None:
    output = FIXTURES / "openhands" / "multi_swe_bench_output.jsonl"
    damaged = tmp_path / "output.jsonl"
    damaged.write_bytes(output.read_bytes() + b"{oops\n")
    other = tmp_path / "other.jsonl"
    shutil.copyfile(output, other)

    with RecordingReader([damaged, other]) as reader:
        assert reader.take(damaged) is None  # a damaged run's error does not pickle
        sent = reader.take(other)

    assert sent is not None and sent.runs and sent.travels()


def test_it_reads_ahead_sixteen_small_files_but_few_big_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_ahead, "cores", lambda: 2)
    small = [tmp_path / f"small-{n}.jsonl" for n in range(40)]
    for path in small:
        path.write_bytes(b"{}\n")
    with RecordingReader(small) as reader:
        assert reader.ahead == read_ahead.AHEAD_FILES
        reader.take(small[0])
        assert reader.ahead == read_ahead.AHEAD_FILES  # one taken, the next one asked for

    big = [tmp_path / f"big-{n}.jsonl" for n in range(6)]
    for path in big:
        with path.open("wb") as file:
            file.truncate(12 * 1024 * 1024)  # sparse: its size is what counts
    with RecordingReader(big) as reader:
        assert reader.ahead == 3  # 36 MB: the third makes it pass 32 MB
        reader.take(big[0])
        assert reader.ahead == 3

    huge = [tmp_path / "huge.jsonl", *small[:3]]
    with huge[0].open("wb") as file:
        file.truncate(read_ahead.AHEAD_BYTES + 1)
    with RecordingReader(huge) as reader:
        assert reader.ahead == 1  # a file bigger than the budget is still read ahead


# --- promotion ahead ------------------------------------------------------------------------


@pytest.fixture
def promoted_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file in which the read-ahead worker (a fork of this process, so it runs this
    wrapper too) writes how many outputs it promoted ahead of each file it read."""
    log = tmp_path / "promoted-ahead.log"
    log.touch()
    of = PromotedAhead.of.__func__  # type: ignore[attr-defined]

    def logged(cls: type[PromotedAhead], opened: Any, **kwargs: Any) -> PromotedAhead | None:
        ahead = of(cls, opened, **kwargs)
        titles = ",".join(str(header.get("id")) for header, _ in opened.sessions())
        with log.open("a") as file:
            file.write(f"{titles} {len(ahead) if ahead is not None else 0}\n")
        return ahead

    monkeypatch.setattr(PromotedAhead, "of", classmethod(logged))
    monkeypatch.setattr(read_ahead, "cores", lambda: 2)
    # Every file promoted ahead, however far ahead the worker is (see RecordingReader).
    monkeypatch.setattr(read_ahead, "PROMOTE_LEAD", 0)
    return log


def promoted_ahead(log: Path) -> list[tuple[str, int]]:
    """(the ids of a file's sessions, how many of its outputs were promoted ahead), for
    each file the worker read, in order."""
    return [(ids, int(count)) for ids, count in map(str.split, log.read_text().splitlines())]


def promoted_count(log: Path) -> int:
    return sum(count for _, count in promoted_ahead(log))


def wait_until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, "the worker did not get there in a minute"
        time.sleep(0.01)


def blob_files(store: FsBlobStore) -> set[str]:
    """Every file in the store's folder (blobs, and temporary files left behind)."""
    return {path.name for path in store.root.iterdir() if path.is_file()}


def assert_every_blob_file_is_recorded(store: FsBlobStore) -> None:
    files = blob_files(store)
    assert {name.rsplit(".", 1)[0] for name in files} == {
        str(blob_id) for blob_id in Blob.objects.values_list("id", flat=True)
    }, "blob files without a row (promoted ahead and never discarded), or rows without one"


def test_outputs_promoted_ahead_are_the_blobs_ingest_records(
    recordings: Path, store: FsBlobStore, promoted_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = []
    take = PromotedAhead.take

    def counted(self: PromotedAhead, output: str) -> Any:
        promotion = take(self, output)
        taken.append(promotion is not None)
        return promotion

    monkeypatch.setattr(PromotedAhead, "take", counted)
    call_command("ingest", str(recordings), stdout=StringIO(), stderr=StringIO())
    ahead = recorded()
    blobs = {
        row.id: (row.kind, row.size, row.count, row.preview)
        for row in Blob.objects.exclude(made_by=None)
    }

    # Promoted by the worker: every stored output, and every blob the items took.
    assert promoted_count(promoted_log) == len(blobs) == taken.count(True) > 50
    assert_every_blob_file_is_recorded(store)
    for blob_id, facts in list(blobs.items())[:20]:  # the rows the worker made are the files'
        assert read_blob_facts(blob_id, store=store).preview == facts[3]
        assert store.load_sync(blob_id) is not None

    # The same records and blobs as when the command promotes every output itself.
    Session.objects.all().delete()
    Blob.objects.all().delete()
    for path in sorted(recordings.iterdir()):
        ingest_recordings(path, store=store)
    assert recorded() == ahead


def test_a_second_ingest_promotes_nothing_ahead(
    recordings: Path, store: FsBlobStore, promoted_log: Path
) -> None:
    call_command("ingest", str(recordings), stdout=StringIO(), stderr=StringIO())
    first = promoted_ahead(promoted_log)
    files = blob_files(store)
    promoted_log.write_text("")

    call_command("ingest", str(recordings), stdout=StringIO(), stderr=StringIO())

    assert sum(count for _, count in first) > 50
    # Every session was in the database: the worker stored nothing, only read.
    assert promoted_ahead(promoted_log) == [(ids, 0) for ids, _ in first]
    assert blob_files(store) == files


def test_promotions_no_item_takes_are_discarded(
    recordings: Path, store: FsBlobStore, promoted_log: Path
) -> None:
    # Two copies of one session: both new when the command starts, so the worker promotes
    # the outputs of both, but the second copy adds nothing to what the first recorded.
    claude = next(recordings.glob(f"*{CLAUDE_SESSIONS[0]}.jsonl"))
    shutil.copyfile(claude, recordings / f"zz-{claude.name}")
    out = StringIO()
    call_command("ingest", str(recordings), stdout=out, stderr=StringIO())

    # Promoted ahead twice: once for each copy.
    counts = [count for ids, count in promoted_ahead(promoted_log) if CLAUDE_SESSIONS[0] in ids]
    assert len(counts) == 2 and counts[0] == counts[1] > 10
    assert ": +0 items (299 in all)" in out.getvalue().splitlines()[-2]
    assert_every_blob_file_is_recorded(store)


def test_what_was_promoted_ahead_of_files_never_taken_is_discarded(
    recordings: Path, store: FsBlobStore, promoted_log: Path
) -> None:
    paths = sorted(recordings.iterdir())
    with RecordingReader(paths, store=store) as reader:
        ingest_recordings(paths[0], store=store, opened=reader.take(paths[0]))
        wait_until(lambda: reader.ready == reader.ahead)  # everything asked for is read
        # Stopped here (Ctrl-C after the file under way): the rest is never ingested.
    assert promoted_count(promoted_log) - Blob.objects.count() > 10  # those had outputs
    assert_every_blob_file_is_recorded(store)


def test_a_failed_ingest_discards_the_blobs_promoted_ahead(
    recordings: Path, store: FsBlobStore, promoted_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(ingest, "_insert_items", refused)
    paths = [next(recordings.glob(f"*{session}.jsonl")) for session in CLAUDE_SESSIONS]
    with RecordingReader(paths, store=store) as reader:
        for path in paths:
            with pytest.raises(RuntimeError, match="the disk is full"):
                ingest_recordings(path, store=store, opened=reader.take(path))

    assert promoted_count(promoted_log) > 10
    assert blob_files(store) == set()


def test_the_worker_promotes_only_while_it_is_ahead(
    tmp_path: Path, store: FsBlobStore, promoted_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_ahead, "PROMOTE_LEAD", 2)
    claude = (FIXTURES / f"{CLAUDE_SESSIONS[0]}.jsonl").read_text()
    paths = [tmp_path / f"{number}.jsonl" for number in range(4)]
    for path in paths:  # sessions of their own, each with outputs to promote
        path.write_text(claude.replace(CLAUDE_SESSIONS[0], str(uuid.uuid4())))

    with RecordingReader(paths, store=store) as reader:
        wait_until(lambda: reader.ready == 4)  # all read before the command takes any
        taken = [reader.take(path) for path in paths]

    # The command was on the first file: the worker promoted the outputs of the files
    # two and more ahead of it, and left those of the first two to the command.
    promoted = [opened is not None and opened.promoted is not None for opened in taken]
    assert promoted == [False, False, True, True]
    assert len(promoted_ahead(promoted_log)) == 2
    for path, opened in zip(paths, taken, strict=True):
        ingest_recordings(path, store=store, opened=opened)
    assert_every_blob_file_is_recorded(store)


@pytest.mark.django_db(transaction=True)  # outside a transaction, a conflict is tried again
def test_a_conflict_tried_again_stores_anew_what_it_took_from_ahead(
    recordings: Path, store: FsBlobStore, promoted_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries = []
    insert_items = ingest._insert_items

    def conflicting_once(*args: Any, **kwargs: Any) -> None:
        tries.append(len(tries) + 1)
        if len(tries) == 1:  # another ingest took this session's seqs meanwhile
            raise IntegrityError("UNIQUE constraint failed: blobviewer_item.session_id")
        insert_items(*args, **kwargs)

    monkeypatch.setattr(ingest, "_insert_items", conflicting_once)
    path = next(recordings.glob(f"*{CLAUDE_SESSIONS[0]}.jsonl"))
    with RecordingReader([path, path], store=store) as reader:  # the second is not taken
        opened = reader.take(path)
        assert opened is not None and opened.promoted is not None
        [(_, result)] = ingest_recordings(path, store=store, opened=opened)

    assert tries == [1, 2]
    assert isinstance(result, IngestResult) and result.new_items == 299
    # The first try's blobs (taken from ahead) went with it; the second stored its own.
    assert promoted_ahead(promoted_log)[0][1] == len(result.stored_blobs) > 10
    assert_every_blob_file_is_recorded(store)
    for blob_id in BlobRef.objects.values_list("blob_id", flat=True):
        assert store.exists_sync(blob_id)


# --- the worker's channel ---------------------------------------------------------------------


def session_copies(tmp_path: Path, count: int) -> list[Path]:
    """*count* copies of a Claude Code recording with outputs to promote, each a session
    of its own."""
    claude = (FIXTURES / f"{CLAUDE_SESSIONS[0]}.jsonl").read_text()
    paths = [tmp_path / f"{number}.jsonl" for number in range(count)]
    for path in paths:
        path.write_text(claude.replace(CLAUDE_SESSIONS[0], str(uuid.uuid4())))
    return paths


def small_logs(folder: Path, count: int) -> list[Path]:
    """*count* small session logs, titled `run <n>`, each with an output to promote."""
    folder.mkdir(exist_ok=True)
    paths = []
    for number in range(count):
        records = [header(title=f"run {number}"), user_item(1, f"task {number}")]
        records += [tool_result_item(2, f"{number}\n{BIG}", call_id="c1")]
        paths.append(folder / f"{number:03d}.jsonl")
        paths[-1].write_text("".join(json.dumps(record) + "\n" for record in records))
    return paths


def test_each_file_comes_back_as_read_however_far_ahead_the_worker_got(
    tmp_path: Path, store: FsBlobStore, promoted_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # More files than the worker has slots for what it read, and before loading each the
    # command lets the worker get as far ahead as it may: every slot is filled again
    # while the command is about to load the one before it.
    load = RecordingReader._load

    def late(self: RecordingReader, index: int, left: Any) -> Any:
        wait_until(lambda: self.ready == self.ahead)
        return load(self, index, left)

    monkeypatch.setattr(RecordingReader, "_load", late)
    paths = small_logs(tmp_path / "logs", 3 * read_ahead.AHEAD_FILES)

    with RecordingReader(paths, store=store) as reader:
        for number, path in enumerate(paths):
            opened = reader.take(path)
            assert opened is not None and opened.log is not None
            assert opened.log.header["title"] == f"run {number}"
            [(_, result)] = ingest_recordings(path, store=store, opened=opened)
            assert isinstance(result, IngestResult) and result.stored_blobs

    assert promoted_count(promoted_log) == Blob.objects.count() == len(paths)
    outputs = {ref.item.session.title: ref.blob_id for ref in BlobRef.objects.all()}
    assert store.load_sync(outputs["run 33"]).text.startswith("33\nline 0")
    assert_every_blob_file_is_recorded(store)


def in_time(work: Callable[[], Any]) -> Any:
    """*work*'s result; fails (instead of hanging) if it takes more than a minute."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(work).result(timeout=60)
    finally:
        pool.shutdown(wait=False)


def read_ahead_workers() -> list[multiprocessing.process.BaseProcess]:
    """This process's read-ahead workers still running."""
    return [p for p in multiprocessing.active_children() if p.name == "blobviewer read-ahead"]


def test_a_worker_that_dies_leaves_the_files_it_did_not_send_to_the_command(
    tmp_path: Path, store: FsBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = read_ahead.read

    def dying(path: Path, index: int) -> Any:
        if index == 5:  # killed, or out of memory, on the sixth file
            os._exit(1)
        return read(path, index)

    monkeypatch.setattr(read_ahead, "read", dying)
    monkeypatch.setattr(read_ahead, "cores", lambda: 2)
    paths = small_logs(tmp_path / "logs", read_ahead.AHEAD_FILES + 4)
    with RecordingReader(paths, store=store) as reader:
        wait_until(lambda: reader.ready == 5 and not read_ahead_workers())
        # Dead before the command took anything: what it sent still comes back, and
        # asking it for more (the first take does) does not lose that.
        taken = in_time(lambda: [reader.take(path) for path in paths])
        assert reader.ahead == 0  # nothing more is asked of it
        for path, opened in zip(paths, taken, strict=True):
            ingest_recordings(path, store=store, opened=opened)

    assert [opened is not None for opened in taken] == [True] * 5 + [False] * (len(paths) - 5)
    assert Session.objects.count() == len(paths) == Blob.objects.count()
    assert_every_blob_file_is_recorded(store)


def test_a_worker_whose_command_was_killed_ends_too(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    small_logs(folder, 3 * read_ahead.AHEAD_FILES)
    script = (
        "import os, signal; from pathlib import Path; from blobviewer import read_ahead; "
        "read_ahead.cores = lambda: 2; "
        f"paths = sorted(Path({str(folder)!r}).iterdir()); "
        "reader = read_ahead.RecordingReader(paths); reader.take(paths[0]); "
        "import multiprocessing as m; "
        "print(*(p.pid for p in m.active_children() if p.name == 'blobviewer read-ahead'), "
        "flush=True); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    env = {**os.environ, "BLOBVIEWER_DATA": str(tmp_path / "data")}
    env.pop("DATABASE_URL", None)
    printed, said = tmp_path / "printed", tmp_path / "said"
    # Files, not pipes: a worker left behind would hold a pipe open, and run() wait.
    with printed.open("w") as out, said.open("w") as err:
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", script],
            cwd=Path(__file__).resolve().parents[3],
            env=env,
            stdout=out,
            stderr=err,
            check=False,
            timeout=120,
        )

    assert done.returncode == -signal.SIGKILL, said.read_text()
    [worker] = map(int, printed.read_text().splitlines()[-1].split())
    try:
        # Killed while the worker waited to be allowed further: it sees the command's
        # end of the pipe close, and ends (or is a zombie, ended, for init to reap).
        wait_until(lambda: not running(worker))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_what_cannot_be_sent_back_is_read_here_and_its_promotions_discarded(
    tmp_path: Path,
    store: FsBlobStore,
    promoted_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = read_ahead.read

    def unpicklable(path: Path, index: int) -> Any:
        opened = read(path, index)
        if index == 1:
            opened.promoted.note = lambda: "a lambda does not pickle"
        return opened

    monkeypatch.setattr(read_ahead, "read", unpicklable)
    paths = session_copies(tmp_path, 3)
    with RecordingReader(paths, store=store) as reader:
        taken = [reader.take(path) for path in paths]
        for path, opened in zip(paths, taken, strict=True):
            ingest_recordings(path, store=store, opened=opened)

    assert [opened is not None for opened in taken] == [True, False, True]
    # Each file's outputs promoted once by the worker, and the second's again here.
    assert promoted_count(promoted_log) == Blob.objects.count() > 30
    assert Session.objects.count() == 3
    assert_every_blob_file_is_recorded(store)  # the second file's promotions are gone
