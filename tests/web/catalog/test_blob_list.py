"""`/blobs/`: every blob with its kind, size, creation time and referencing sessions."""

from __future__ import annotations

import io
import uuid

import pytest
from django.urls import reverse

from blobviewer.models import Blob

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def test_it_lists_the_blobs_with_their_facts(logged_in_client, sample_session):
    response = logged_in_client.get(reverse("blob_list"))

    assert response.status_code == 200
    html = response.content.decode()
    assert str(sample_session.text_blob) in html and str(sample_session.json_blob) in html
    assert "300 lines" in html and "60 entries" in html
    # Made by a step of the sample session (tests/web/catalog/test_blob_list_columns.py has more).
    assert ">run_build</a>" in html and ">list_issues</a>" in html
    assert ">Fix the build</a>" in html
    # Newest first: the JSON blob was stored after the text blob.
    assert html.index(str(sample_session.json_blob)) < html.index(str(sample_session.text_blob))


def test_it_filters_by_kind(logged_in_client, sample_session):
    html = logged_in_client.get(reverse("blob_list"), {"kind": "json_array"}).content.decode()

    assert str(sample_session.json_blob) in html
    assert str(sample_session.text_blob) not in html


def test_it_filters_the_missing_ones(logged_in_client, sample_session):
    absent = Blob.objects.create(id=uuid.uuid4(), missing=True)

    html = logged_in_client.get(reverse("blob_list"), {"kind": "missing"}).content.decode()

    assert str(absent.id) in html and str(sample_session.text_blob) not in html
    assert '<span class="badge missing">missing</span>' in html


def test_it_answers_htmx_with_the_list_fragment(logged_in_client, sample_session):
    html = logged_in_client.get(reverse("blob_list"), headers=HTMX).content.decode()

    assert html.lstrip().startswith('<div id="list">')
    assert "<html" not in html


def test_it_pages_the_blobs(logged_in_client):
    Blob.objects.bulk_create(Blob(id=uuid.uuid4(), kind="text", size=1) for _ in range(60))

    html = logged_in_client.get(reverse("blob_list")).content.decode()
    assert html.count('<tr class="blob-row') == 50
    assert "page 1 of 2" in html

    html = logged_in_client.get(reverse("blob_list"), {"page": 2}).content.decode()
    assert html.count('<tr class="blob-row') == 10


def test_it_needs_a_login(client, db):
    assert client.get(reverse("blob_list")).status_code == 302


def test_blobs_that_no_session_references_are_listed_too(logged_in_client, sample_session, store):
    from django.core.management import call_command

    from core.content import Text

    lone = store.store_sync(Text("written by an agent whose session was never ingested\n"))
    (store.root / ".tmp-half-written").write_bytes(b"not a blob")
    call_command("blobs", "index", stdout=io.StringIO())  # page requests never index

    html = logged_in_client.get(reverse("blob_list")).content.decode()

    assert str(lone) in html
    assert Blob.objects.get(id=lone).kind == "text"
    assert Blob.objects.count() == 3


def test_a_blob_stored_after_another_was_removed_is_still_listed(
    logged_in_client, sample_session, store
):
    from django.core.management import call_command

    from core.content import Text

    call_command("blobs", "index", stdout=io.StringIO())
    store.path_of(sample_session.text_blob).unlink()
    newer = store.store_sync(Text("stored after the other one was removed\n"))
    call_command("blobs", "index", stdout=io.StringIO())

    html = logged_in_client.get(reverse("blob_list")).content.decode()

    assert str(newer) in html
