"""A big JSON blob's page reads its indented rendering, written once when the blob is
indexed, instead of parsing the whole blob on every request."""

from __future__ import annotations

import pytest
from django.urls import reverse

from blobviewer.catalog import blobs as catalog
from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store, renderings
from core.json_values import dumps_indented
from core.store import FsBlobStore

pytestmark = pytest.mark.django_db

VALUE = [{"id": n, "name": f"item <{n}>", "tags": ["a", "b"]} for n in range(2_000)]


@pytest.fixture
def big_json(json_blob, monkeypatch):
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 1_000)
    blob_id = json_blob(VALUE)
    refresh_blob(blob_id, store=blob_store())
    return blob_id


def test_its_pages_never_load_the_whole_blob(logged_in_client, big_json, monkeypatch):
    def no_whole_loads(*args, **kwargs):
        raise AssertionError("the whole blob was loaded")

    monkeypatch.setattr(FsBlobStore, "load_sync", no_whole_loads)
    url = reverse("blob_detail", args=[big_json])
    expected = dumps_indented(VALUE).split("\n")

    tree = logged_in_client.get(url)
    first = logged_in_client.get(url, {"as": "raw"})
    later = logged_in_client.get(url, {"start": "501", "as": "raw"}, headers={"HX-Request": "true"})

    assert tree.status_code == first.status_code == later.status_code == 200
    # The tree's first page comes from the start of the rendering.
    assert "entries 0.." in tree.content.decode() and "of 2,000" in tree.content.decode()
    assert "&quot;item &lt;0&gt;&quot;" in tree.content.decode()
    assert f"JSON lines 1–500 of {len(expected):,}" in first.content.decode()
    assert f"JSON lines 501–1,000 of {len(expected):,}" in later.content.decode()
    assert "item &lt;0&gt;" in first.content.decode()
    assert "<0>" not in first.content.decode()


def test_the_rendering_matches_what_the_blob_holds(big_json):
    assert renderings().load_sync(big_json).text == dumps_indented(VALUE)


def test_without_its_rendering_the_page_reads_the_blob(logged_in_client, big_json):
    renderings().path_of(big_json).unlink()
    response = logged_in_client.get(reverse("blob_detail", args=[big_json]), {"as": "raw"})
    assert response.status_code == 200
    assert "JSON lines 1–500 of" in response.content.decode()


def test_a_selector_still_reads_the_blob(logged_in_client, big_json):
    url = reverse("blob_detail", args=[big_json])
    response = logged_in_client.get(url, {"selector": "slice:3..5"})
    assert response.status_code == 200
    assert "entries 3..5 of 2,000" in response.content.decode()
