"""`manage.py ingest --jobs N` (issue 9): files ingested by worker processes on PostgreSQL,
reported in file order; two files of one session at once; the workers' machinery
(blobviewer.ingest.parallel) on its own; and an ingest that meets rows another ingest of
its session committed meanwhile plans again instead of failing."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import Count

from blobviewer.ingest import sessions as ingest_module
from blobviewer.ingest.parallel import ingest_in_workers
from blobviewer.ingest.sessions import IngestError, ingest_session
from blobviewer.models import Blob, Item, SearchChunk, Session
from web.records import BUILD_LOG, header, tool_result_item, user_item

postgresql_only = pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").split(":")[0] not in ("postgres", "postgresql"),
    reason="worker processes ingest on PostgreSQL only (CI runs the suite on both databases)",
)


def write_log(folder: Path, name: str, session_id: uuid.UUID, items: int) -> Path:
    """A session log of *items* items, every third a promoted build log."""
    records = [header(session_id, title=name)]
    for seq in range(1, items + 1):
        if seq % 3 == 0:
            records.append(tool_result_item(seq, f"{name} {seq}\n{BUILD_LOG}", call_id=f"c{seq}"))
        else:
            records.append(user_item(seq, f"{name}: message {seq}"))
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def ingest(*args: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("ingest", *[str(arg) for arg in args], stdout=out, stderr=err)
    except CommandError as error:  # with what the command said, to see why
        raise CommandError(f"{error}\n{err.getvalue()}") from None
    return out.getvalue(), err.getvalue()


# --- the command, on PostgreSQL -------------------------------------------------------------


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_workers_ingest_every_file_and_report_them_in_file_order(tmp_path, store):
    folder = tmp_path / "logs"
    folder.mkdir()
    sizes = {f"log{n:02}": 4 + 7 * (n % 4) for n in range(12)}
    ids = {name: uuid.uuid4() for name in sizes}
    for name, items in sizes.items():
        write_log(folder, name, ids[name], items)

    out, err = ingest(folder, "--jobs", 3)

    assert err == ""
    lines = [line for line in out.splitlines() if line.startswith("[")]
    assert [line.split("] ")[0] + "]" for line in lines] == [f"[{n}/12]" for n in range(1, 13)]
    for line, (name, items) in zip(lines, sorted(sizes.items()), strict=True):
        assert f"{name}.jsonl: +{items} items ({items} in all)" in line
    assert f"12 of 12 files ingested, {sum(sizes.values())} new items" in out
    for name, items in sizes.items():
        session = Session.objects.get(id=ids[name])
        assert session.item_count == items == Item.objects.filter(session=session).count()
        assert session.title == name
    # Every promoted output is a stored blob with its row.
    promoted = Item.objects.filter(type="tool_result", output__startswith="[blob:")
    assert promoted.count() == sum(items // 3 for items in sizes.values())
    assert Blob.objects.filter(missing=False).count() == promoted.count()
    assert len(list(store.ids_sync())) == promoted.count()

    again, _ = ingest(folder, "--jobs", 3)  # idempotent: nothing new
    assert "12 of 12 files ingested, 0 new items" in again


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_two_files_of_one_session_at_once_record_it_once(tmp_path, store):
    folder = tmp_path / "logs"
    folder.mkdir()
    session_id = uuid.uuid4()
    first = write_log(folder, "a", session_id, 30)
    for copy in ("b", "c", "d"):  # the same log under other names, ingested at once
        shutil.copy(first, folder / f"{copy}.jsonl")

    out, err = ingest(folder, "--jobs", 4)

    assert err == ""
    assert "4 of 4 files ingested, 30 new items" in out
    session = Session.objects.get(id=session_id)
    assert Item.objects.filter(session=session).count() == 30 == session.item_count
    assert Blob.objects.count() == 10
    assert len(list(store.ids_sync())) == 10  # the losers' blobs were discarded
    # Indexed for search once: no chunk twice.
    chunks = SearchChunk.objects.values("item_id", "blob_id", "source", "start")
    assert not chunks.annotate(n=Count("id")).filter(n__gt=1).exists()
    assert SearchChunk.objects.filter(item__isnull=False).values("item_id").distinct().count() == 30


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_damaged_file_is_reported_and_the_others_are_ingested(tmp_path, store):
    folder = tmp_path / "logs"
    folder.mkdir()
    for n in range(4):
        write_log(folder, f"log{n}", uuid.uuid4(), 5)
    damaged = folder / "log1.jsonl"
    damaged.write_text(damaged.read_text().replace('"seq": 2,', '"seq": "two",'))

    with pytest.raises(CommandError, match="1 path"):
        ingest(folder, "--jobs", 2)

    assert Session.objects.count() == 3
    assert Item.objects.count() == 15


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_the_default_on_postgresql_is_workers(tmp_path, store, monkeypatch):
    folder = tmp_path / "logs"
    folder.mkdir()
    for n in range(3):
        write_log(folder, f"log{n}", uuid.uuid4(), 4)
    pids: list[int] = []
    real = ingest_module.ingest_recordings

    def noting(path, **kwargs):
        pids.append(os.getpid())
        Path(tmp_path / f"pid-{os.getpid()}-{path.name}").touch()
        return real(path, **kwargs)

    monkeypatch.setattr("blobviewer.management.commands.ingest.ingest_recordings", noting)
    out, _ = ingest(folder)

    assert "3 of 3 files ingested, 12 new items" in out
    ran_in = {int(marker.name.split("-")[1]) for marker in tmp_path.glob("pid-*")}
    assert ran_in and os.getpid() not in ran_in  # in worker processes, not this one


# --- the command, anywhere ------------------------------------------------------------------


@pytest.mark.django_db
def test_jobs_must_be_a_positive_number(tmp_path, store):
    for jobs in ("0", "-2"):
        with pytest.raises(CommandError, match="--jobs: give a number of processes"):
            ingest(tmp_path, "--jobs", jobs)


@pytest.mark.django_db
def test_jobs_on_sqlite_is_refused_with_the_reason(tmp_path, store):
    folder = tmp_path / "logs"
    folder.mkdir()
    write_log(folder, "log", uuid.uuid4(), 3)
    if connection.vendor == "sqlite":
        with pytest.raises(CommandError, match="SQLite takes one writer at a time"):
            ingest(folder, "--jobs", 2)
        assert not Session.objects.exists()
    else:  # PostgreSQL: inside this test's transaction the files are ingested in turn
        out, _ = ingest(folder, "--jobs", 2)
        assert "1 of 1 files ingested, 3 new items" in out


@pytest.mark.django_db(transaction=True)
def test_an_ingest_that_meets_a_session_committed_meanwhile_plans_again(tmp_path, store):
    """Another ingest of the same session commits between this one's plan and its
    transaction: this one's rows conflict, it plans again, and adds only what is new."""
    session_id = uuid.uuid4()
    head = header(session_id)
    first = [user_item(1, "one"), tool_result_item(2, BUILD_LOG)]
    grown = [*first, user_item(3, "three")]
    real = ingest_module.index_blobs
    calls = []

    def racing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # after this ingest's plan: another one records the session
            other = threading.Thread(
                target=lambda: (
                    ingest_session(head, first, source_path="other", store=store),
                    connection.close(),
                )
            )
            other.start()
            other.join()
        return real(*args, **kwargs)

    ingest_module.index_blobs = racing
    try:
        result = ingest_session(head, grown, source_path="this", store=store)
    finally:
        ingest_module.index_blobs = real

    assert len(calls) >= 2  # planned again
    assert result.new_items == 1 and result.total_items == 3
    seqs = Item.objects.filter(session_id=session_id).values_list("seq", flat=True)
    assert sorted(seqs) == [1, 2, 3]
    # The first try's blob was discarded: one blob, the other ingest's.
    assert Blob.objects.count() == 1
    assert len(list(store.ids_sync())) == 1


# --- the workers' machinery -----------------------------------------------------------------


def test_outcomes_come_back_in_the_order_of_the_items_whatever_order_they_end_in():
    def work(n: int) -> list[tuple[str, Any]]:
        time.sleep(0.05 * (5 - n))  # the first items take longest
        return [("", (n, os.getpid()))]

    done = list(ingest_in_workers(list(range(6)), work, jobs=3, stop=threading.Event()))

    assert [item for item, _ in done] == list(range(6))
    assert [outcomes[0][1][0] for _, outcomes in done] == list(range(6))
    assert os.getpid() not in {outcomes[0][1][1] for _, outcomes in done}


def test_once_stopped_nothing_more_starts_and_what_ran_is_reported(tmp_path):
    def work(n: int) -> list[tuple[str, Any]]:
        (tmp_path / f"ran-{n}").touch()
        time.sleep(0.2)
        return [("", n)]

    stop = threading.Event()
    done = []
    for item, _ in ingest_in_workers(list(range(40)), work, jobs=2, stop=stop):
        done.append(item)
        stop.set()

    ran = sorted(int(path.name.split("-")[1]) for path in tmp_path.glob("ran-*"))
    assert done == list(range(len(done)))  # a prefix, in order
    assert ran == done  # every item that ran was reported, and no other ran
    assert len(done) < 40


def test_a_worker_that_dies_leaves_its_items_to_this_process():
    parent = os.getpid()

    def work(n: int) -> list[tuple[str, Any]]:
        if n == 2 and os.getpid() != parent:
            os._exit(3)  # killed mid-file
        return [("", (n, os.getpid()))]

    done = list(ingest_in_workers(list(range(6)), work, jobs=2, stop=threading.Event()))

    assert [outcomes[0][1][0] for _, outcomes in done] == list(range(6))
    assert done[2][1][0][1][1] == parent


def test_an_exception_that_cannot_travel_is_reported_in_its_own_words():
    class Unpicklable(Exception):
        def __reduce__(self):
            raise TypeError("no")

    def work(item: tuple[Path, bool]) -> list[tuple[str, Any]]:
        return [("", Unpicklable("the disk is full")), ("run 2", IngestError("p", 3, "bad"))]

    files = [(Path("x.jsonl"), True), (Path("y"), True)]
    [(_, outcomes), _] = list(ingest_in_workers(files, work, jobs=2, stop=threading.Event()))

    error = outcomes[0][1]
    assert isinstance(error, IngestError)
    assert str(error) == "x.jsonl: could not be ingested: Unpicklable: the disk is full"
    kept = outcomes[1][1]
    assert type(kept) is IngestError and str(kept) == "p:3: bad" and kept.line == 3


@pytest.mark.django_db
def test_inside_a_transaction_everything_runs_in_this_process():
    assert connection.in_atomic_block
    done = list(
        ingest_in_workers([1, 2, 3], lambda n: [("", os.getpid())], jobs=2, stop=threading.Event())
    )
    assert {outcomes[0][1] for _, outcomes in done} == {os.getpid()}
