"""`manage.py ingest`: idempotent, grows with the log, links blobs, survives damage."""

from __future__ import annotations

import json
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from blobviewer.ingest.database_ready import FILLED_TABLES
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Blob, BlobRef, IngestedFile, Item, Session
from core.content import Text
from web.records import BUILD_LOG, header, record_sample_session, tool_result_item, user_item

pytestmark = pytest.mark.django_db


def ingest(*paths: Path | str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_records_the_session_its_items_and_their_blob_links(sample_log, store):
    ingest(sample_log.path)

    session = Session.objects.get(id=sample_log.id)
    assert session.title == "Fix the build"
    assert session.model == "test-model"
    assert session.meta == {"repo": "demo"}
    assert session.item_count == 9
    assert session.tool_result_count == 4
    assert session.blob_count == 2
    assert list(session.items.values_list("seq", flat=True)) == list(range(1, 10))
    first = session.items.get(seq=1)
    assert first.type == "user" and first.text == "The build is failing; find out why."
    call = session.items.get(seq=2).tool_calls
    assert call == [{"id": "c1", "name": "run_build", "arguments": {}}]
    linked = set(BlobRef.objects.filter(session=session).values_list("blob_id", flat=True))
    assert linked == {sample_log.text_blob, sample_log.json_blob}


def test_it_indexes_the_referenced_blobs_from_the_store(sample_session, store):
    text = Blob.objects.get(id=sample_session.text_blob)
    assert (text.kind, text.count, text.missing) == ("text", 300, False)
    assert text.size == len(BUILD_LOG.encode())
    assert text.created_at is not None and text.created_at.year >= 2024

    array = Blob.objects.get(id=sample_session.json_blob)
    assert (array.kind, array.count, array.missing) == ("json_array", 60, False)
    assert array.size == store.path_of(sample_session.json_blob).stat().st_size


def test_it_counts_the_bytes_promotion_kept_out_of_the_context(sample_session, store):
    session = sample_session.session
    outputs = Item.objects.filter(session=session, type="tool_result")
    in_history = sum(len(item.output.encode()) for item in outputs)
    assert session.output_bytes_in_history == in_history
    # The two promoted outputs count with their blobs' sizes, the others as they are.
    promoted = [o for o in outputs if o.tool in ("run_build", "list_issues")]
    others = [o for o in outputs if o not in promoted]
    received = (
        store.size_sync(sample_session.text_blob)
        + store.size_sync(sample_session.json_blob)
        + sum(len(o.output.encode()) for o in others)
    )
    assert session.output_bytes_received == received
    assert session.bytes_kept_out == received - in_history > 10_000


def test_it_is_idempotent(sample_log):
    ingest(sample_log.path)
    before = (Item.objects.count(), BlobRef.objects.count(), Blob.objects.count())

    unchanged, _ = ingest(sample_log.path)
    IngestedFile.objects.all().delete()  # read again: ingest itself must add nothing
    out, _ = ingest(sample_log.path)

    assert (Item.objects.count(), BlobRef.objects.count(), Blob.objects.count()) == before
    assert ": unchanged since its last ingest" in unchanged
    assert "+0 items (9 in all)" in out


def test_it_adds_only_the_new_items_of_a_grown_log(write_log, text_blob):
    session_id = uuid.uuid4()
    path = write_log([header(session_id), user_item(1, "one"), user_item(2, "two")])
    ingest(path)
    first_ids = set(Item.objects.values_list("pk", flat=True))
    blob = text_blob("grown\n" * 500)
    with path.open("a") as log:
        log.write(
            '{"type":"tool_result","seq":3,"at":"2025-05-01T12:00:03+00:00","call_id":"c",'
            f'"tool":"run","output":"[blob:{blob}] text | 500 lines","is_error":false}}\n'
        )

    out, _ = ingest(path)

    session = Session.objects.get(id=session_id)
    assert session.item_count == 3
    assert first_ids < set(Item.objects.values_list("pk", flat=True))
    assert session.blob_count == 1
    assert "+1 items (3 in all)" in out


def test_it_skips_a_torn_last_line_and_reads_it_once_complete(write_log):
    session_id = uuid.uuid4()
    path = write_log([header(session_id), user_item(1, "one")])
    with path.open("a") as log:
        log.write('{"type": "user", "seq": 2, "at": "2025-05-01T12:00:0')  # crash mid-write

    out, err = ingest(path)
    assert Session.objects.get(id=session_id).item_count == 1
    assert "torn" in out and err == ""

    with path.open("a") as log:
        log.write('1+00:00", "text": "two"}\n')
    ingest(path)
    assert Session.objects.get(id=session_id).item_count == 2


def test_it_reports_a_malformed_file_with_its_line_and_ingests_the_others(write_log):
    good = write_log([header(), user_item(1, "fine")], name="a-good.jsonl")
    bad = write_log(
        [header(), user_item(1, "fine"), "{not json", user_item(3, "x")], name="b.jsonl"
    )

    with pytest.raises(CommandError) as failure:
        ingest(good.parent)

    assert failure.value.returncode == 1
    assert Session.objects.count() == 1
    assert Session.objects.get().source_path == str(good)
    # The error names the file and the line, as path:line: message.
    _, err = _ingest_capturing_errors(good.parent)
    assert f"{bad}:3: " in err


def _ingest_capturing_errors(*paths: Path) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError):
        call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_keeps_what_was_ingested_when_a_log_is_damaged_later(write_log):
    session_id = uuid.uuid4()
    path = write_log([header(session_id), user_item(1, "one"), user_item(2, "two")])
    ingest(path)
    path.write_text(path.read_text() + "garbage\n" + '{"type":"user","seq":4,"text":"x"}\n')

    _, err = _ingest_capturing_errors(path)

    assert f"{path}:4: " in err
    assert Session.objects.get(id=session_id).item_count == 2


@pytest.mark.parametrize(
    ("records", "line", "message"),
    [
        ([{"type": "user", "seq": 1, "text": "no header"}], 1, "first line"),
        ([header(id="not-a-uuid")], 1, "session id"),
        ([header(), {"type": "user", "seq": "one", "text": "x"}], 2, "seq"),
        ([header(), {"type": "robot", "seq": 1}], 2, "type"),
    ],
)
def test_it_names_what_is_wrong_with_a_damaged_log(write_log, records, line, message):
    path = write_log(records)

    _, err = _ingest_capturing_errors(path)

    assert err.startswith(f"{path}:{line}: ")
    assert message in err
    assert Session.objects.count() == 0


def test_it_rejects_a_log_that_repeats_a_seq(write_log):
    path = write_log([header(), user_item(1, "one"), user_item(1, "again")])

    _, err = _ingest_capturing_errors(path)

    assert "seq 1 appears more than once" in err
    assert Item.objects.count() == 0


def test_it_marks_referenced_blobs_the_store_does_not_have_as_missing(write_log, store, text_blob):
    absent = uuid.UUID("01900000-0000-7000-8000-000000000001")
    path = write_log([header(), tool_result_item(1, f"[blob:{absent}] text | 3 lines")])

    out, _ = ingest(path)

    blob = Blob.objects.get(id=absent)
    assert blob.missing and blob.kind == "" and blob.size is None
    assert "1 missing" in out

    # Once the blob turns up, a later ingest picks it up (and its size).
    (store.root / f"{absent}.txt").write_text("a\nb\nc\n")
    path.write_text(path.read_text() + json.dumps(user_item(2, f"[blob:{absent}]")) + "\n")
    ingest(path)
    blob.refresh_from_db()
    assert (blob.missing, blob.kind, blob.count) == (False, "text", 3)
    assert Item.objects.get(seq=1).received_bytes == 6


def test_it_searches_folders_recursively_for_session_logs(store, data_dir):
    nested = data_dir / "sessions" / "team" / "alice"
    nested.mkdir(parents=True)
    record_sample_session(store, nested, title="nested")
    record_sample_session(store, data_dir / "sessions", title="top")
    (nested / "notes.txt").write_text("not a log")

    out, _ = ingest(data_dir / "sessions")

    assert set(Session.objects.values_list("title", flat=True)) == {"nested", "top"}
    assert "[2/2]" in out


def test_it_fails_for_a_path_that_does_not_exist(tmp_path, data_dir):
    _, err = _ingest_capturing_errors(tmp_path / "nope.jsonl")
    assert "nope.jsonl: no such file or directory" in err


def test_it_stores_text_the_database_cannot_hold_with_visible_stand_ins(write_log):
    path = write_log([header(title="nul\x00title"), user_item(1, "a\x00b \ud800 c")])

    ingest(path)

    item = Item.objects.get()
    assert item.text == "a\u2400b \ufffd c"
    assert Session.objects.get().title == "nul\u2400title"


def test_importers_can_ingest_parsed_records_with_their_own_received_sizes(store):
    """Importers hand over a header and records in the session log's shape."""
    blob = store.store_sync(Text("x" * 5000))
    session_id = uuid.uuid4()
    records = [
        user_item(1, "hello"),
        {**tool_result_item(2, f"[blob:{blob}] text | 1 lines"), "received_bytes": 5000},
    ]

    result = ingest_session(
        header(session_id, title="imported"),
        records,
        source_path="/imports/run.json",
        store=store,
        source_format="openai-chat",
    )

    session = Session.objects.get(id=session_id)
    assert (result.new_items, result.total_items, result.blobs) == (2, 2, 1)
    assert session.source_format == "openai-chat"
    assert session.output_bytes_received == 5000
    assert session.bytes_kept_out == 5000 - len(records[1]["output"])


def _item_rows_counted() -> float:
    """What PostgreSQL last counted of the item table (pg_class, updated by ANALYZE)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'blobviewer_item'")
        return float(cursor.fetchone()[0])


def test_an_ingest_that_wrote_rows_has_postgresql_count_them_for_its_planner(sample_log, store):
    """PostgreSQL plans search from its tables' statistics, which autovacuum refreshes only
    a while after they grew: the ingest command refreshes them when it wrote something."""
    postgresql = connection.vendor == "postgresql"
    if postgresql:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE blobviewer_item")  # empty, in this test's transaction
        assert _item_rows_counted() == 0
    with CaptureQueriesContext(connection) as first:
        ingest(sample_log.path)
    with CaptureQueriesContext(connection) as again:
        ingest(sample_log.path)  # unchanged: nothing written, nothing to count
    analyzed = [q["sql"] for q in first.captured_queries if q["sql"].startswith("ANALYZE")]
    assert not [q for q in again.captured_queries if q["sql"].startswith("ANALYZE")]
    if postgresql:
        assert len(analyzed) == 1 and all(t in analyzed[0] for t in FILLED_TABLES)
        assert _item_rows_counted() == Item.objects.count() == 9
    else:
        assert analyzed == []  # SQLite's plans need no statistics


def test_an_ingest_postgresql_will_not_count_for_still_succeeds_and_says_so(
    sample_log, store, monkeypatch
):
    if connection.vendor != "postgresql":
        pytest.skip("only PostgreSQL is asked to count the tables (CI runs both databases)")
    from blobviewer.ingest import database_ready

    # A table PostgreSQL cannot count stands for any refusal (a lock waited for too long).
    monkeypatch.setattr(database_ready, "FILLED_TABLES", ("blobviewer_item", "no_such_table"))
    out, err = ingest(sample_log.path)

    assert "1 of 1 files ingested" in out
    assert err.startswith("ingested, but PostgreSQL did not count the tables for search:")
    assert Item.objects.count() == 9  # and the transaction is still usable
