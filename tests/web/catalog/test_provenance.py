"""Provenance on a blob's page: titled by the step that made it, the steps that refer to
it listed near the top, and when its output was recorded (blobviewer.catalog.provenance)."""

from __future__ import annotations

import html as html_lib
import re
import uuid
from io import StringIO
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.catalog.provenance import (
    PREVIEW_CHARS,
    REFERENCES_SHOWN,
    blob_provenance,
    made_blob,
    read_preview,
)
from blobviewer.data_dir import blob_store
from blobviewer.ingest.options import IngestOptions
from blobviewer.ingest.sessions import ingest_session
from blobviewer.migrations import __path__ as migrations_path
from blobviewer.models import Blob, Item, Session
from core.inspect_tool import inspect_blob
from core.promotion import admit_sync, promote
from core.store import FsBlobStore
from core.store.file_reader import FileReader
from web.records import record_sample_session
from web.timeline_records import assistant, call, result, user

pytestmark = pytest.mark.django_db

APP_SOURCE = "".join(f"line {n}: def handler_{n}(request): return {n}\n" for n in range(1, 41))


def header(session_id: uuid.UUID, title: str = "Fix the app", **fields: Any) -> dict[str, Any]:
    return {
        "type": "session",
        "id": str(session_id),
        "created_at": "2025-05-01T12:00:00+00:00",
        "title": title,
        "model": "m",
        "meta": {},
        **fields,
    }


def ingest(session_id: uuid.UUID, records: list[dict[str, Any]], **kwargs: Any) -> Session:
    ingest_session(
        header(session_id, **kwargs.pop("header", {})),
        records,
        source_path=f"test:{session_id}",
        store=blob_store(),
        **kwargs,
    )
    return Session.objects.get(id=session_id)


def stored(text: str) -> tuple[uuid.UUID, str]:
    """A blob of *text* in the store, and the summary a live run would have recorded."""
    admitted = admit_sync(promote(text), blob_store())
    assert admitted.blob_id is not None
    return admitted.blob_id, admitted.text


def read_then_inspect(data_dir: Path) -> tuple[Session, uuid.UUID]:
    """A run that reads src/app.py (a promoted output) and then inspects that blob."""
    blob_id, summary = stored(APP_SOURCE)
    inspected = inspect_blob(blob_store(), str(blob_id), "lines:1-2")
    records = [
        user(1, "What does the app do?"),
        assistant(2, call("t1", "Read", {"file_path": "src/app.py"})),
        result(3, "t1", summary, tool="Read"),
        assistant(4, call("t2", "inspect", {"blob_id": str(blob_id), "selector": "lines:1-2"})),
        result(5, "t2", inspected, tool="inspect"),
        assistant(6, text=f"It defines 40 handlers (see [blob:{blob_id}])."),
    ]
    return ingest(uuid.uuid4(), records), blob_id


def page(client: Any, blob_id: uuid.UUID) -> str:
    response = client.get(reverse("blob_detail", args=[blob_id]))
    assert response.status_code == 200
    return response.content.decode()


def head_of(html: str) -> str:
    return re.search(r'<header class="blob-head">.*?</header>', html, re.S).group(0)


def text_of(fragment: str) -> str:
    return html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


# --- made by -------------------------------------------------------------------------------


def test_the_page_is_titled_by_the_step_that_made_the_blob(logged_in_client, data_dir):
    session, blob_id = read_then_inspect(data_dir)

    html = page(logged_in_client, blob_id)

    assert "<title>Read src/app.py · Fix the app · blobviewer</title>" in html
    head = head_of(html)
    assert '<h1 class="made-by">Read src/app.py</h1>' in head
    # Then the step and its session, linked: the step on the timeline, the session.
    made_in = re.search(r'<p class="made-in">.*?</p>', head, re.S).group(0)
    step_link = re.search(r'href="([^"]+)">step #3</a>', made_in).group(1)
    assert step_link.startswith(session.get_absolute_url()) and step_link.endswith("#step-3")
    assert f'href="{session.get_absolute_url()}">Fix the app</a>' in made_in
    # The id stays, secondary.
    assert f'<p class="blob-id">blob <code>{blob_id}</code></p>' in head
    assert "<h1>Blob" not in html


def test_the_maker_is_stored_on_the_blob_when_the_session_is_ingested(data_dir):
    session, blob_id = read_then_inspect(data_dir)

    blob = Blob.objects.get(id=blob_id)

    assert blob.made_by == Item.objects.get(session=session, seq=3)
    assert blob.made_by_title == "Read src/app.py"


def test_blobs_sent_after_their_log_keep_their_maker_and_get_a_preview(
    client, api_token, tmp_path, data_dir
):
    agent = record_sample_session(FsBlobStore(tmp_path / "blobs"), tmp_path / "sessions")
    auth = {"Authorization": f"Bearer {api_token[1]}"}
    log = agent.path.read_bytes()
    client.post("/api/sessions", data=log, content_type="application/x-ndjson", headers=auth)
    missing = Blob.objects.get(id=agent.text_blob)
    assert missing.missing and missing.made_by.seq == 3 and missing.preview == ""

    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in (tmp_path / "blobs").iterdir()]
    data = {"log": SimpleUploadedFile("session.jsonl", log), "blob": files}
    client.post("/api/sessions", data=data, headers=auth)

    blob = Blob.objects.get(id=agent.text_blob)
    assert not blob.missing and blob.made_by.seq == 3 and blob.made_by_title == "run_build"
    assert blob.preview == "step 1: compiling module_1.py ... ok"


def test_blobs_index_stores_the_preview_of_blobs_written_straight_into_the_store(store):
    blob_id, _ = stored(APP_SOURCE)

    call_command("blobs", "index", stdout=StringIO())

    blob = Blob.objects.get(id=blob_id)
    assert blob.preview == "line 1: def handler_1(request): return 1" and blob.made_by is None


def test_a_shell_step_is_titled_by_its_command(logged_in_client, data_dir):
    log = "".join(f"test_{n} PASSED\n" for n in range(200))
    records = [
        assistant(1, call("b1", "Bash", {"command": "pytest -x"})),
        result(2, "b1", log, tool="Bash"),  # promoted at ingest
    ]
    session = ingest(uuid.uuid4(), records)
    blob_id = made_blob("tool_result", "Bash", session.items.get(seq=2).output)

    html = page(logged_in_client, blob_id)

    assert '<h1 class="made-by">Bash: pytest -x</h1>' in html


def test_a_maker_whose_call_is_not_recorded_is_titled_by_its_tool(logged_in_client, data_dir):
    blob_id, summary = stored(APP_SOURCE)
    ingest(uuid.uuid4(), [result(1, "lost", summary, tool="fetch_report")])

    assert '<h1 class="made-by">fetch_report</h1>' in page(logged_in_client, blob_id)


def test_a_call_recorded_before_its_result_in_an_earlier_ingest_still_titles_it(data_dir):
    blob_id, summary = stored(APP_SOURCE)
    session_id = uuid.uuid4()
    calls = [user(1, "go"), assistant(2, call("t9", "Read", {"file_path": "docs/a.md"}))]
    ingest(session_id, calls)

    ingest(session_id, [*calls, result(3, "t9", summary, tool="Read")])  # the log grew

    assert Blob.objects.get(id=blob_id).made_by_title == "Read docs/a.md"


def test_an_inspect_result_never_makes_a_blob(logged_in_client, data_dir):
    blob_id, _ = stored(APP_SOURCE)
    refresh_blob(blob_id, store=blob_store())
    inspected = inspect_blob(blob_store(), str(blob_id), "lines:3-4")
    ingest(
        uuid.uuid4(),
        [
            assistant(1, call("i1", "inspect", {"blob_id": str(blob_id)})),
            result(2, "i1", inspected, tool="inspect"),
        ],
    )

    html = page(logged_in_client, blob_id)

    assert Blob.objects.get(id=blob_id).made_by is None
    assert f"<h1>Blob <code>{blob_id}</code></h1>" in html
    assert "Referred to by 1 step" in html  # what it is instead


def test_an_output_that_only_mentions_a_blob_later_on_does_not_make_it(data_dir):
    blob_id, _ = stored(APP_SOURCE)
    ingest(uuid.uuid4(), [result(1, "c", f"see [blob:{blob_id}] for the rest", tool="bash")])

    assert Blob.objects.get(id=blob_id).made_by is None


def test_the_first_session_to_make_a_blob_keeps_it(data_dir):
    blob_id, summary = stored(APP_SOURCE)
    first = ingest(uuid.uuid4(), [result(1, "a", summary, tool="Read")], header={"title": "one"})
    ingest(uuid.uuid4(), [result(1, "b", summary, tool="Grep")], header={"title": "two"})

    assert Blob.objects.get(id=blob_id).made_by.session == first


def test_a_rebuild_links_its_recreated_items_again(data_dir):
    blob_id, summary = stored(APP_SOURCE)
    session_id = uuid.uuid4()
    records = [
        assistant(1, call("t1", "Read", {"file_path": "src/app.py"})),
        result(2, "t1", summary, tool="Read"),
    ]
    ingest(session_id, records, version=0)
    maker = Blob.objects.get(id=blob_id).made_by

    ingest(session_id, records, options=IngestOptions(rebuild=True))  # re-creates the items

    blob = Blob.objects.get(id=blob_id)
    assert blob.made_by is not None and blob.made_by.pk == maker.pk
    assert blob.made_by.seq == 2 and blob.made_by_title == "Read src/app.py"


def test_a_pruned_makers_blob_keeps_a_page_without_it(logged_in_client, data_dir):
    session, blob_id = read_then_inspect(data_dir)
    session.delete()

    html = page(logged_in_client, blob_id)

    assert Blob.objects.get(id=blob_id).made_by is None
    assert f"<h1>Blob <code>{blob_id}</code></h1>" in html


# --- refers to -----------------------------------------------------------------------------


def test_the_steps_that_refer_to_the_blob_are_listed_near_the_top(logged_in_client, data_dir):
    session, blob_id = read_then_inspect(data_dir)

    head = head_of(page(logged_in_client, blob_id))

    refers = re.search(r'<section class="refers".*?</section>', head, re.S).group(0)
    assert "Referred to by 2 steps" in refers
    items = re.findall(r"<li>.*?</li>", refers, re.S)
    # The inspect step, with what it read; then the answer that mentions it. Not the maker.
    assert text_of(items[0]).startswith("#5 inspect lines 1-2 of 40 in Fix the app")
    assert f'href="{reverse("item_detail", args=[session.id, 5])}"' in items[0]
    assert text_of(items[1]).startswith("#6 assistant message in Fix the app")
    assert "#3" not in refers


def test_references_in_other_sessions_are_listed_too(logged_in_client, data_dir):
    _, blob_id = read_then_inspect(data_dir)
    ingest(uuid.uuid4(), [user(1, f"look at [blob:{blob_id}]")], header={"title": "Review"})

    refers = re.search(
        r'<section class="refers".*?</section>', page(logged_in_client, blob_id), re.S
    )

    assert "Referred to by 3 steps" in refers.group(0)
    assert "user message" in refers.group(0) and ">Review</a>" in refers.group(0)


def test_it_lists_the_first_references_and_counts_the_rest(logged_in_client, data_dir):
    blob_id, summary = stored(APP_SOURCE)
    many = REFERENCES_SHOWN + 5
    ingest(
        uuid.uuid4(),
        [result(1, "t", summary, tool="Read")]
        + [user(2 + n, f"again [blob:{blob_id}]") for n in range(many)],
    )

    refers = re.search(
        r'<section class="refers".*?</section>', page(logged_in_client, blob_id), re.S
    )

    assert f"Referred to by {many} steps" in refers.group(0)
    assert refers.group(0).count("<li>") == REFERENCES_SHOWN
    assert "… and 5 more, not listed." in refers.group(0)
    # In the order they were recorded: the first ones.
    assert f">#{2 + REFERENCES_SHOWN - 1}</a>" in refers.group(0)
    assert f">#{2 + REFERENCES_SHOWN}</a>" not in refers.group(0)


def test_a_blob_no_session_references_keeps_its_id_as_title(logged_in_client, store, text_blob):
    blob_id = text_blob("written by an agent straight into the store\n")
    refresh_blob(blob_id, store=store)

    html = page(logged_in_client, blob_id)

    assert f"<title>Blob {blob_id} · blobviewer</title>" in html
    assert f"<h1>Blob <code>{blob_id}</code></h1>" in html
    assert "No recorded session references this blob." in html
    assert 'class="refers"' not in html and "made-in" not in html


def test_an_unindexed_blob_keeps_its_id_as_title(logged_in_client, data_dir):
    blob_id, _ = stored(APP_SOURCE)  # in the store, no row

    html = page(logged_in_client, blob_id)

    assert f"<h1>Blob <code>{blob_id}</code></h1>" in html


def test_in_place_views_and_htmx_swaps_carry_no_header(logged_in_client, data_dir):
    _, blob_id = read_then_inspect(data_dir)
    url = reverse("blob_detail", args=[blob_id])

    for headers in ({"HX-Request": "true"}, {"HX-Request": "true", "HX-Target": "item-3-blob"}):
        html = logged_in_client.get(
            url, {"selector": "lines:1-2"}, headers=headers
        ).content.decode()
        assert "made-by" not in html and "Referred to by" not in html


# --- the recorded time ---------------------------------------------------------------------


def test_a_blob_promoted_at_import_shows_when_its_output_was_recorded(logged_in_client, data_dir):
    records = [
        assistant(1, call("t1", "Read", {"file_path": "big.log"})),
        {**result(2, "t1", APP_SOURCE * 3, tool="Read"), "at": "2024-03-02T10:20:30+00:00"},
    ]
    session = ingest(uuid.uuid4(), records)  # promoted now, from a recording of 2024
    blob_id = made_blob("tool_result", "Read", session.items.get(seq=2).output)
    created = Blob.objects.get(id=blob_id).created_at

    facts = re.search(r'<dl class="facts">.*?</dl>', page(logged_in_client, blob_id), re.S).group(0)

    assert (
        '<dt>Recorded</dt><dd><time datetime="2024-03-02T10:20:30+00:00">2024-03-02 10:20:30 UTC'
        in facts
    )
    assert f'<dt>Stored</dt><dd><time datetime="{created.isoformat()}' in facts
    assert created.year > 2024 and "<dt>Created</dt>" not in facts


def test_a_blob_without_a_recorded_time_shows_when_it_was_stored(logged_in_client, data_dir):
    _, blob_id = read_then_inspect(data_dir)  # records without times

    facts = re.search(r'<dl class="facts">.*?</dl>', page(logged_in_client, blob_id), re.S).group(0)

    assert "<dt>Recorded</dt>" not in facts and "<dt>Stored</dt>" in facts


# --- the page asks the database, never scans -------------------------------------------------


def test_provenance_takes_a_few_queries_however_many_references(
    data_dir, django_assert_max_num_queries
):
    blob_id, summary = stored(APP_SOURCE)
    ingest(
        uuid.uuid4(),
        [result(1, "t", summary, tool="Read")]
        + [user(2 + n, f"[blob:{blob_id}]") for n in range(60)],
    )
    blob = Blob.objects.get(id=blob_id)

    with django_assert_max_num_queries(3):
        provenance = blob_provenance(blob)

    assert provenance.title == "Read" and provenance.reference_count == 60


# --- previews ------------------------------------------------------------------------------


def preview_of(path):
    with FileReader(path, "json" if path.suffix == ".json" else "text") as blob:
        return read_preview(blob)


def test_a_preview_is_the_first_line_with_something_to_read(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"\n   \n\x1b[1;32m  PASSED\x1b[0m\tall 3 tests\x07\nsecond line\n")

    assert preview_of(path) == "PASSED all 3 tests"


def test_a_long_first_line_is_cut_with_an_ellipsis(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("x" * 10_000 + "\n", encoding="utf-8")

    preview = preview_of(path)

    assert preview == "x" * (PREVIEW_CHARS - 1) + "…"


def test_a_json_preview_is_the_start_of_its_compact_text(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b'{"items":[{"id":1,"name":"a"}],"total":1}')

    assert preview_of(path) == '{"items":[{"id":1,"name":"a"}],"total":1}'


def test_a_preview_of_bytes_that_are_not_utf8_is_still_text(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"caf\xe9 \xed\xa0\x80 ok\n")

    assert preview_of(path) == "caf\ufffd \ufffd\ufffd\ufffd ok"


# --- the migration fills what was recorded before it -------------------------------------------


def test_the_migration_fills_makers_and_previews_of_existing_blobs(data_dir):
    session, blob_id = read_then_inspect(data_dir)
    Blob.objects.update(made_by=None, made_by_title="", preview="")
    migration = _migration_module()

    migration.fill_makers_and_previews(apps, SimpleNamespace(connection=connection))

    blob = Blob.objects.get(id=blob_id)
    assert blob.made_by == session.items.get(seq=3)
    assert blob.made_by_title == "Read src/app.py"
    assert blob.preview == "line 1: def handler_1(request): return 1"


def _migration_module() -> Any:
    import importlib

    assert any(Path(p, "0008_blob_reader.py").is_file() for p in migrations_path)
    return importlib.import_module("blobviewer.migrations.0008_blob_reader")


def test_the_admin_names_a_maker_by_id_not_with_a_menu_of_every_item(
    client, data_dir, django_user_model
):
    _, blob_id = read_then_inspect(data_dir)
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-pw-pw"))

    html = client.get(reverse("admin:blobviewer_blob_change", args=[blob_id])).content.decode()

    assert 'name="made_by"' in html and "vForeignKeyRawIdAdminField" in html
    assert '<select name="made_by"' not in html
    assert (
        "Read src/app.py"
        in client.get(reverse("admin:blobviewer_blob_changelist")).content.decode()
    )
