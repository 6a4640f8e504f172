"""No GET writes Blob rows or lists the store: `/blobs/` notes when the store changed since
`manage.py blobs index` last ran, and a blob page reads a blob the database does not know
(yet) through the store, with a note naming the command."""

from __future__ import annotations

import io
import os
import re
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from blobviewer.models import Blob, ShareLink
from core.content import Structured, Text
from core.store import FsBlobStore

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
WRITES = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
NOT_INDEXED = "This blob is not indexed yet"
APPEARED = "The index still has this blob as missing; the store has it now."
COMMAND = "<code>manage.py blobs index</code>"


@pytest.fixture
def no_store_listing(store: FsBlobStore, monkeypatch):
    """Fail the test if anything lists the store's directory."""
    root = os.path.realpath(store.root)

    def guarded(real):
        def listing(path=".", *args, **kwargs):
            if os.path.realpath(os.fsdecode(path)).startswith(root):
                raise AssertionError(f"the store was listed: {path}")
            return real(path, *args, **kwargs)

        return listing

    monkeypatch.setattr(os, "scandir", guarded(os.scandir))
    monkeypatch.setattr(os, "listdir", guarded(os.listdir))
    monkeypatch.setattr(FsBlobStore, "ids_sync", lambda self: pytest.fail("ids_sync on a GET"))


def index() -> str:
    out = io.StringIO()
    call_command("blobs", "index", stdout=out)
    return out.getvalue()


def get(client, url: str, *, headers: dict[str, str] | None = None, **query: str):
    """GET *url*; fails if the request wrote to the database."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, query, headers=headers or {})
    writes = [q["sql"] for q in queries.captured_queries if WRITES.match(q["sql"])]
    assert writes == [], f"{url} wrote to the database: {writes}"
    return response


def blob_url(blob_id: uuid.UUID) -> str:
    return reverse("blob_detail", args=[blob_id])


def note(html: str) -> str:
    match = re.search(r'<p class="note index-note" role="status">(.*?)</p>', html, re.S)
    return re.sub(r"<[^>]+>", "", match.group(1)) if match else ""


# --- the blob list -------------------------------------------------------------------------


def test_the_blob_list_writes_nothing_and_never_lists_the_store(
    logged_in_client, sample_session, store, no_store_listing
):
    lone = store.store_sync(Text("written by an agent, never ingested\n"))

    html = get(logged_in_client, reverse("blob_list")).content.decode()
    fragment = get(logged_in_client, reverse("blob_list"), headers=HTMX).content.decode()

    assert str(sample_session.text_blob) in html and str(lone) not in html
    assert str(sample_session.text_blob) in fragment
    assert not Blob.objects.filter(id=lone).exists()


def test_the_blob_list_names_the_command_until_blobs_are_first_indexed(
    logged_in_client, sample_session
):
    html = get(logged_in_client, reverse("blob_list")).content.decode()

    assert note(html) == (
        "Blobs have not been indexed on this data folder yet. Blobs that agents or the CLI "
        "wrote straight into the store are listed once you run manage.py blobs index."
    )
    assert COMMAND in html


def test_the_note_goes_once_blobs_are_indexed_and_comes_back_when_the_store_changes(
    logged_in_client, sample_session, store
):
    index()
    assert note(get(logged_in_client, reverse("blob_list")).content.decode()) == ""

    lone = store.store_sync(Text("written straight into the store\n"))
    html = get(logged_in_client, reverse("blob_list")).content.decode()

    assert note(html).startswith("The blob store has changed since blobs were last indexed (")
    assert "manage.py blobs index" in note(html)
    assert str(lone) not in html

    assert index().startswith("1 blob added")
    html = get(logged_in_client, reverse("blob_list")).content.decode()
    assert note(html) == "" and str(lone) in html


def test_the_note_says_when_blobs_were_last_indexed(logged_in_client, store):
    index()
    store.store_sync(Text("new\n"))

    html = get(logged_in_client, reverse("blob_list")).content.decode()

    today = timezone.localtime().strftime("%Y-%m-%d")
    assert re.search(
        rf"last indexed \(<time datetime=\"{today}T[^\"]+\">{today} \d\d:\d\d</time>\)", html
    )


def test_a_damaged_marker_is_read_as_never_indexed(logged_in_client, store, data_dir):
    index()
    (data_dir / "blobs-indexed.json").write_text("{not json")

    html = get(logged_in_client, reverse("blob_list")).content.decode()

    assert note(html).startswith("Blobs have not been indexed on this data folder yet.")


def test_without_a_store_folder_there_is_no_note(logged_in_client, data_dir):
    (data_dir / "blobs").rmdir()

    html = get(logged_in_client, reverse("blob_list")).content.decode()

    assert note(html) == ""


# --- a blob page ---------------------------------------------------------------------------


def test_an_unindexed_text_blob_is_read_through_the_store_with_a_note(
    logged_in_client, store, no_store_listing
):
    blob_id = store.store_sync(Text("".join(f"line {n}\n" for n in range(1, 101))))

    response = get(logged_in_client, blob_url(blob_id), selector="lines:20-21")

    assert response.status_code == 200
    html = response.content.decode()
    assert "<dt>Kind</dt><dd>text</dd>" in html
    assert "100 lines" in html and "<dd>792\u00a0bytes</dd>" in html
    assert "lines 20–21 of 100" in html
    assert '<span class="r" id="L20"><a class="ln" href="#L20" tabindex="-1">20</a>line 20' in html
    assert 'id="L22"' not in html
    assert NOT_INDEXED in html and COMMAND in html
    assert "No recorded session references this blob." in html
    assert not Blob.objects.exists()


def test_an_unindexed_json_blob_is_read_with_selectors_too(logged_in_client, store):
    blob_id = store.store_sync(Structured({"items": [{"n": n} for n in range(30)], "ok": True}))

    html = get(
        logged_in_client, blob_url(blob_id), selector="key:items | slice:3..5"
    ).content.decode()

    assert "<dt>Kind</dt><dd>json_object</dd>" in html and "2 keys" in html
    assert "entries 3..5 of 30" in html
    # The tree links each entry to its own selector: 3 and 4 are there, 5 is not.
    assert "key%3Aitems+%7C+slice%3A3..4" in html and "slice%3A5..6" not in html
    assert NOT_INDEXED in html


def test_an_unindexed_blob_answers_a_bad_selector_with_400(logged_in_client, store):
    blob_id = store.store_sync(Text("just text\n"))

    response = get(logged_in_client, blob_url(blob_id), selector="slice:0..2")

    assert response.status_code == 400
    assert b"slice: applies to a JSON array; this blob is text" in response.content


def test_the_htmx_fragment_of_an_unindexed_blob_carries_the_note(logged_in_client, store):
    blob_id = store.store_sync(Text("a\nb\nc\n"))

    html = get(
        logged_in_client, blob_url(blob_id), headers=HTMX, selector="lines:2"
    ).content.decode()

    assert html.lstrip().startswith('<section id="blob-view"')
    assert NOT_INDEXED in html and "lines 2–2 of 3" in html


def test_an_unindexed_blob_that_cannot_be_read_is_an_error_on_the_page(logged_in_client, store):
    blob_id = uuid.UUID("01900000-0000-7000-8000-000000000041")
    (store.root / f"{blob_id}.json").write_text("[1, 2,")

    response = get(logged_in_client, blob_url(blob_id))

    assert response.status_code == 200
    assert b"The store cannot read this blob" in response.content
    assert not Blob.objects.exists()


def test_an_id_neither_the_store_nor_the_database_knows_is_404(logged_in_client, store):
    response = get(logged_in_client, blob_url(uuid.UUID("01900000-0000-7000-8000-000000000042")))

    assert response.status_code == 404
    assert b"No blob has this id" in response.content


def test_a_row_marked_missing_whose_blob_appeared_is_shown_without_writing_the_row(
    logged_in_client, store
):
    blob_id = uuid.UUID("01900000-0000-7000-8000-000000000043")
    Blob.objects.create(id=blob_id, missing=True)
    (store.root / f"{blob_id}.txt").write_text("arrived after the session was ingested\n")

    html = get(logged_in_client, blob_url(blob_id)).content.decode()

    assert "arrived after the session was ingested" in html
    assert APPEARED in html and COMMAND in html
    assert "the store does not have it" not in html
    row = Blob.objects.get(id=blob_id)
    assert row.missing and row.kind == "" and row.indexed_at is None

    index()
    assert not Blob.objects.get(id=blob_id).missing
    assert APPEARED not in get(logged_in_client, blob_url(blob_id)).content.decode()


def test_a_row_whose_blob_left_the_store_is_shown_missing_without_writing(
    logged_in_client, sample_session, store
):
    store.path_of(sample_session.text_blob).unlink()

    for headers in ({}, HTMX):
        response = get(logged_in_client, blob_url(sample_session.text_blob), headers=headers)
        assert response.status_code == 200
        assert b"the store does not have it" in response.content
        assert NOT_INDEXED.encode() not in response.content
    assert not Blob.objects.get(id=sample_session.text_blob).missing


def test_an_indexed_blob_page_has_no_note_and_writes_nothing(
    logged_in_client, sample_session, no_store_listing
):
    html = get(logged_in_client, blob_url(sample_session.text_blob)).content.decode()

    assert "lines 1–300 of 300" in html
    assert NOT_INDEXED not in html and APPEARED not in html


def test_a_share_page_whose_blob_appeared_writes_nothing(client, user, store):
    blob_id = uuid.UUID("01900000-0000-7000-8000-000000000044")
    Blob.objects.create(id=blob_id, missing=True)
    link = ShareLink.objects.create(
        blob_id=blob_id, created_by=user, expires_at=timezone.now() + timedelta(days=1)
    )
    (store.root / f"{blob_id}.txt").write_text("shared, and here now\n")

    response = get(client, reverse("share_detail", args=[link.token]))

    assert response.status_code == 200
    assert b"shared, and here now" in response.content
    assert COMMAND.encode() not in response.content  # a visitor cannot run commands
    assert Blob.objects.get(id=blob_id).missing


def test_sharing_an_unindexed_blob_indexes_it_on_the_post(logged_in_client, store):
    blob_id = store.store_sync(Text("worth sharing\n"))
    html = get(logged_in_client, blob_url(blob_id)).content.decode()
    assert reverse("share_create", args=[blob_id]) in html

    response = logged_in_client.post(
        reverse("share_create", args=[blob_id]), {"selector": "lines:1", "days": "7"}
    )

    assert response.status_code == 302
    row = Blob.objects.get(id=blob_id)
    assert row.kind == "text" and not row.missing
    assert ShareLink.objects.get().blob_id == blob_id


def test_sharing_an_id_nobody_knows_is_404(logged_in_client, store):
    blob_id = uuid.UUID("01900000-0000-7000-8000-000000000045")

    response = logged_in_client.post(
        reverse("share_create", args=[blob_id]), {"selector": "", "days": "7"}
    )

    assert response.status_code == 404
    assert not Blob.objects.exists()


def test_a_big_unindexed_text_page_reads_only_its_lines_after_one_pass(
    logged_in_client, store, monkeypatch
):
    blob_id = store.store_sync(Text("".join(f"row {n}\n" for n in range(1, 200_001))))
    monkeypatch.setattr(FsBlobStore, "load_sync", lambda *a, **k: pytest.fail("whole load"))

    html = get(logged_in_client, blob_url(blob_id), selector="lines:199999-").content.decode()

    assert "lines 199,999–200,000 of 200,000" in html
    row = '<span class="r" id="L200000"><a class="ln" href="#L200000" tabindex="-1">200000</a>'
    assert row + "row 200000" in html


def test_the_marker_lives_beside_the_store_not_in_it(store, data_dir):
    before = sorted(os.listdir(store.root))

    index()

    assert sorted(os.listdir(store.root)) == before
    assert Path(data_dir / "blobs-indexed.json").is_file()
