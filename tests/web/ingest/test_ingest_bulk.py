"""Ingest writes in bulk (docs/benchmarks.md#ingest): rows in multi-row INSERTs that
read back exactly as Django's own writes, a file's rows in a few statements whatever its
size, a first ingest's facts and totals taken from its items without reading them back,
equal to what the rows say, and SQLite in write-ahead-log mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta, timezone
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone as django_timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from blobviewer.bulk_insert import _json_text, insert_objects, insert_rows
from blobviewer.catalog.provenance import made_blob
from blobviewer.ingest import rows
from blobviewer.ingest import sessions as ingest_module
from blobviewer.ingest.sessions import ingest_file
from blobviewer.models import Blob, BlobRef, Item, Session
from blobviewer.search.folding import storable
from core.store import FsBlobStore
from importers.recordings import CLAUDE_CODE, FIXTURES
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[3]
BIG = "".join(f"line {n}: the tool printed this\n" for n in range(200))  # promoted


def new_session() -> Session:
    return Session.objects.create(id=uuid.uuid4(), created_at=django_timezone.now())


def item_fields(n: int, session: Session) -> dict[str, Any]:
    """Values of every kind an Item column holds, different for each *n*."""
    east = timezone(timedelta(hours=5, minutes=30))
    return {
        "session_id": session.id,
        "seq": n,
        "type": ["user", "assistant", "tool_result"][n % 3],
        "at": None if n % 4 == 0 else datetime(2025, 5, 1, 12, n % 60, 7, 123456 + n, tzinfo=east),
        "text": f"héllo wörld ✓ {n}\n" * (n % 3),
        "tool_calls": [] if n % 2 else [{"id": f"c{n}", "name": "bash", "arguments": {"n": n}}],
        "call_id": f"c{n}",
        "tool": "bash" if n % 2 else "",
        "output": "out\t" * n,
        "is_error": n % 5 == 0,
        "role": "meta" if n % 7 == 0 else "",
        "sidechain": n % 2 == 0,
        "digest": f"{n:064x}",
        "output_bytes": n * 4,
        "received_bytes": 2**62 + n,
        "input_tokens": None if n % 3 else 2**63 - 1,
        "output_tokens": n,
        "context_tokens": None,
        "duration": None if n % 2 else timedelta(seconds=n, microseconds=17),
        "note": "recovered" if n == 3 else "",
    }


def stored(queryset: Any) -> list[dict[str, Any]]:
    """Rows as the ORM reads them back, without what differs between two sessions."""
    return [
        {k: v for k, v in row.items() if k not in ("id", "session_id")}
        for row in queryset.order_by("seq").values()
    ]


class Row:
    """A plain object with an item's fields, as ingest hands them to insert_objects."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


@pytest.fixture(params=[False, True], ids=["straight", "logged"])
def logged(request: Any) -> Any:
    """Statements run as ingest runs them, without or with Django logging every query
    (DEBUG), which runs them the same way; the queries logged, or None."""
    if not request.param:
        yield None
        return
    with CaptureQueriesContext(connection) as queries:
        yield queries


def test_bulk_rows_read_back_as_djangos_own_writes(logged):
    by_django, by_us = new_session(), new_session()
    Item.objects.bulk_create([Item(**item_fields(n, by_django)) for n in range(1, 40)])

    ids = insert_objects(
        Item, [Row(**item_fields(n, by_us)) for n in range(1, 40)], exclude=("id",), returning="id"
    )

    assert stored(Item.objects.filter(session=by_us)) == stored(
        Item.objects.filter(session=by_django)
    )
    assert len(ids) == 39
    if logged is not None:  # the query as the database ran it, values and all
        inserts = [q["sql"] for q in logged.captured_queries if q["sql"].startswith("INSERT")]
        assert any("héllo wörld ✓ 2" in sql for sql in inserts)


def test_returned_ids_are_those_of_the_rows_in_order_across_statements(logged):
    session = new_session()
    rows = [Row(**item_fields(n, session)) for n in range(1, 1_201)]  # three statements

    ids = insert_objects(Item, rows, exclude=("id",), returning="id")

    by_seq = dict(Item.objects.filter(session=session).values_list("seq", "id"))
    assert ids == [by_seq[n] for n in range(1, 1_201)]


JSON_VALUES = [
    [],
    {},
    [{"id": "c1", "name": "bash", "arguments": {"command": "ls -la", "n": 3}}],
    {"big": 2**70, "negative": -(2**65), "tiny": 1e-7, "huge": 1e300, "exp": 1.5e16},
    {"text": 'héllo ✓ 🎉 "quoted" back\\slash\ttab\nline', "ключ": ["значение", None]},
    {"nested": [[[{"deep": [True, False, None, 0, -0.0, 0.5]}]]]},
]


def test_json_values_read_back_as_djangos_own_writes():
    by_django, by_us = new_session(), new_session()
    Item.objects.bulk_create(
        [
            Item(**{**item_fields(n, by_django), "tool_calls": v})
            for n, v in enumerate(JSON_VALUES, 1)
        ]
    )
    insert_objects(
        Item,
        [Row(**{**item_fields(n, by_us), "tool_calls": v}) for n, v in enumerate(JSON_VALUES, 1)],
        exclude=("id",),
    )

    ours = [row["tool_calls"] for row in stored(Item.objects.filter(session=by_us))]
    assert ours == [row["tool_calls"] for row in stored(Item.objects.filter(session=by_django))]
    assert (
        len(ours) == len(JSON_VALUES) and ours[3]["big"] == 2**70 and type(ours[3]["tiny"]) is float
    )


@pytest.mark.parametrize(
    "value",
    [
        {"nan": float("nan")},
        [float("inf")],
        {"in a tuple": (float("nan"),)},
        {"big": 2**70},
        ["\ud800"],
        {1: "a"},
    ],
)
def test_json_text_is_jsons_own_where_orjson_would_write_otherwise_or_refuses(value):
    assert _json_text(value) == json.dumps(value)


@pytest.mark.django_db(transaction=True)
def test_a_refused_row_is_djangos_integrity_error_and_its_statement_writes_nothing(logged):
    session = new_session()
    insert_objects(Item, [Row(**item_fields(1, session))], exclude=("id",))

    with pytest.raises(IntegrityError, match="UNIQUE|unique"):  # (session, seq) is unique
        insert_objects(Item, [Row(**item_fields(n, session)) for n in (2, 1)], exclude=("id",))

    assert list(Item.objects.filter(session=session).values_list("seq", flat=True)) == [1]


def test_a_row_already_there_is_kept_when_conflicts_are_ignored():
    blob_id = uuid.uuid4()
    Blob.objects.create(id=blob_id, kind="text", size=10, count=2)
    again = Blob(id=blob_id, kind="json_array", size=99, count=7)
    other = Blob(id=uuid.uuid4(), kind="json_object", size=5, count=1)

    insert_objects(Blob, [again, other], ignore_conflicts=True)

    assert Blob.objects.get(id=blob_id).kind == "text"
    assert Blob.objects.get(id=other.id).kind == "json_object"


def test_it_refuses_rows_of_the_wrong_width_and_ids_it_could_not_line_up():
    session = new_session()
    with pytest.raises(ValueError, match="every row must have 3 values"):
        insert_rows(Item, ["session_id", "seq", "type"], [(session.id, 1)])
    with pytest.raises(ValueError, match="do not go together"):
        insert_rows(Blob, ["id"], [(uuid.uuid4(),)], returning="id", ignore_conflicts=True)
    assert not Item.objects.exists()


# --- a file in few statements -----------------------------------------------------------------


def write_log(folder: Path, items: int, promoted: int) -> Path:
    """A session log of *items* items, *promoted* of them outputs big enough for a blob."""
    records: list[dict[str, Any]] = [header()]
    for seq in range(1, items + 1):
        if seq <= promoted:
            records.append(tool_result_item(seq, f"{seq}\n{BIG}", call_id=f"c{seq}"))
        else:
            records.append(user_item(seq, f"note {seq}"))
    path = folder / f"{uuid.uuid4()}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def statements_to_ingest(path: Path, store: FsBlobStore, monkeypatch: Any) -> int:
    # Search indexing runs after the ingest's transaction and is measured on its own.
    monkeypatch.setattr(ingest_module, "index_session", lambda *args, **kwargs: None)
    with CaptureQueriesContext(connection) as queries:
        ingest_file(path, store=store)
    return len(queries)


def test_a_files_rows_take_a_few_statements_whatever_its_size(data_dir, store, monkeypatch):
    small = statements_to_ingest(write_log(data_dir, 20, 5), store, monkeypatch)
    large = statements_to_ingest(write_log(data_dir, 1_500, 300), store, monkeypatch)

    # 1,480 more items, 295 more blobs and references: a few more batches, not a
    # statement each.
    assert large - small <= 8, (small, large)
    assert Item.objects.count() == 1_520
    assert Blob.objects.count() == BlobRef.objects.count() == 305


# --- a first ingest's facts, from its items ---------------------------------------------------


def facts(session_id: uuid.UUID) -> dict[str, Any]:
    """What ingest works out about a session: its facts and totals, each step's duration
    and sizes, and which step made each blob (and its title)."""
    session = Session.objects.get(id=session_id)
    fields = [
        "started_at",
        "ended_at",
        "duration",
        "step_count",
        "error_count",
        "status",
        "item_count",
        "tool_result_count",
        "blob_count",
        "output_bytes_received",
        "output_bytes_in_history",
    ]
    items = list(
        Item.objects.filter(session=session)
        .order_by("seq")
        .values_list("seq", "duration", "output_bytes", "received_bytes")
    )
    makers = sorted(
        Blob.objects.filter(made_by__session=session).values_list("made_by__seq", "made_by_title")
    )
    made = [
        seq
        for seq, kind, tool, output in Item.objects.filter(session=session).values_list(
            "seq", "type", "tool", "output"
        )
        if made_blob(kind, tool, output) is not None
    ]
    return {
        "session": {name: getattr(session, name) for name in fields},
        "items": items,
        "makers": makers,
        "made": sorted(made),
    }


def ingest(*paths: Path) -> None:
    call_command("ingest", *[str(p) for p in paths], stdout=StringIO(), stderr=StringIO())


def halves(source: Path, folder: Path) -> tuple[Path, Path]:
    """The first half of a JSON Lines recording, and all of it, as the same file growing."""
    lines = source.read_bytes().splitlines(keepends=True)
    half = folder / "half" / source.name
    half.parent.mkdir()
    half.write_bytes(b"".join(lines[: len(lines) // 2]))
    whole = folder / "whole" / source.name
    whole.parent.mkdir()
    whole.write_bytes(source.read_bytes())
    return half, whole


JSON_LINES_RECORDINGS = [
    CLAUDE_CODE,
    FIXTURES / "claude_code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    FIXTURES / "codex" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
]


@pytest.mark.parametrize("source", JSON_LINES_RECORDINGS, ids=lambda p: p.name)
def test_a_first_ingest_works_out_what_reading_its_rows_back_would(source, data_dir, tmp_path):
    half, whole = halves(source, tmp_path)
    ingest(whole)  # every item at once: the facts come from the items
    session_id = Session.objects.get().id
    at_once = facts(session_id)
    Session.objects.all().delete()

    ingest(half)  # half of them, then the rest: the facts come from the rows
    ingest(whole)

    assert Session.objects.get().id == session_id
    assert facts(session_id) == at_once
    assert at_once["session"]["item_count"] > 100
    assert at_once["makers"] and len(at_once["makers"]) == len(at_once["made"])
    assert [seq for seq, _ in at_once["makers"]] == at_once["made"]


def test_our_own_log_grown_in_two_ingests_ends_as_one_ingest_of_it(sample_log, store, data_dir):
    lines = sample_log.path.read_bytes().splitlines(keepends=True)
    ingest_file(sample_log.path, store=store)
    at_once = facts(sample_log.id)
    Session.objects.all().delete()
    sample_log.path.write_bytes(b"".join(lines[:4]))

    ingest_file(sample_log.path, store=store)
    sample_log.path.write_bytes(b"".join(lines))
    ingest_file(sample_log.path, store=store)

    assert facts(sample_log.id) == at_once
    assert at_once["session"]["step_count"] == 3  # c4's result has no call


# --- SQLite's journal ---------------------------------------------------------------------------


def test_sqlite_keeps_a_write_ahead_log_and_commits_without_waiting_for_the_disk(tmp_path):
    env = {**os.environ, "BLOBVIEWER_DATA": str(tmp_path / "data")}
    env.pop("DATABASE_URL", None)
    script = (
        "from django.db import connection; c = connection.cursor(); "
        "print(c.execute('PRAGMA journal_mode').fetchone()[0], "
        "c.execute('PRAGMA synchronous').fetchone()[0])"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )

    # 1 is NORMAL: a commit appends to the log; the log is synced at checkpoints.
    assert done.stdout.splitlines()[-1].split() == ["wal", "1"]


def test_times_are_stored_in_utc_as_the_orm_stores_them():
    session = new_session()
    moment = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=-7)))
    fields = {**item_fields(1, session), "at": moment}

    insert_objects(Item, [Row(**fields)], exclude=("id",))

    assert Item.objects.get(session=session).at == moment.astimezone(UTC)


# --- values the databases cannot hold ---------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(codec=None, categories=None), max_size=6)
    | st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udfffy", "\\u0000", "ok"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=4) | st.sampled_from(["\x00k", "\udc80", "key"]), children, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None)
@given(json_values)
def test_tool_call_arguments_are_made_storable_as_a_walk_over_them_would(value):
    walked = rows.storable_walk(value)

    made = rows.storable_json(value)

    assert made == walked
    assert repr(made) == repr(walked)  # the same strings, keys and key order


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab\x00\ud800\udfffé✓\n"), max_size=30))
def test_text_is_made_storable_with_nul_and_lone_surrogates_stood_in_for(text):
    expected = "".join(
        "\u2400" if c == "\x00" else "\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text
    )

    assert storable(text) == expected
    assert rows.storable_text(text) == expected


def test_times_in_utc_are_stored_as_the_orm_stores_them():
    by_django, by_us = new_session(), new_session()
    moments = [
        datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),  # no fraction: the text has none either
        datetime(1, 1, 2, tzinfo=UTC),
    ]
    rows = [{**item_fields(n, by_us), "at": at} for n, at in enumerate(moments, start=1)]
    Item.objects.bulk_create([Item(**{**row, "session_id": by_django.id}) for row in rows])

    insert_objects(Item, [Row(**row) for row in rows], exclude=("id",))

    assert stored(Item.objects.filter(session=by_us)) == stored(
        Item.objects.filter(session=by_django)
    )
    # As the database holds them (SQLite: text), not only as they read back.
    assert raw_times(by_us) == raw_times(by_django)


def raw_times(session: Session) -> list[Any]:
    session_id = Item._meta.get_field("session").get_db_prep_value(session.id, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT at FROM {Item._meta.db_table} WHERE session_id = %s ORDER BY seq",
            [session_id],
        )
        return [at for (at,) in cursor.fetchall()]


# --- blob rows that `blobs index` inserted first -------------------------------------------------


def test_a_blob_row_that_blobs_index_inserted_meanwhile_is_kept_and_gets_its_maker(
    data_dir, store, monkeypatch
):
    """`manage.py blobs index`, in another process, lists the store between the moment
    ingest stores a promoted output and the moment it inserts the blob's row: the row it
    inserted is kept, the ingest goes on in the same try (even inside a caller's
    transaction, as an upload runs it) and the row gets its maker."""
    from django.db import transaction

    from blobviewer.catalog.store_scan import catalog_store

    monkeypatch.setattr(ingest_module, "index_session", lambda *args, **kwargs: None)
    real_index_blobs = ingest_module.catalog_blobs
    tries = []

    def indexed_first(blob_ids: Any, **kwargs: Any) -> Any:
        tries.append(1)
        catalog_store(store)  # what the other process commits first
        return real_index_blobs(blob_ids, **kwargs)

    monkeypatch.setattr(ingest_module, "catalog_blobs", indexed_first)
    path = write_log(data_dir, 4, 2)

    with transaction.atomic():
        result = ingest_file(path, store=store)

    assert len(tries) == 1 and result.new_items == 4
    blobs = Blob.objects.filter(id__in=result.stored_blobs)
    assert blobs.count() == 2
    makers = {blob.made_by.seq for blob in blobs}
    assert makers == {1, 2}
    assert all(blob.made_by_title for blob in blobs)


@pytest.mark.django_db(transaction=True)
def test_an_insert_in_a_transaction_that_must_roll_back_is_refused(logged):
    """As Django's own cursor refuses it: the rows would silently go with the rollback."""
    from django.db import transaction
    from django.db.transaction import TransactionManagementError

    session = new_session()
    with transaction.atomic():
        with pytest.raises(IntegrityError):
            Session.objects.create(id=session.id, created_at=django_timezone.now())
        with pytest.raises(TransactionManagementError):
            insert_objects(Item, [Row(**item_fields(1, session))], exclude=("id",))
    assert not Item.objects.filter(session=session).exists()
