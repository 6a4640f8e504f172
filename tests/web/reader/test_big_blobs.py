"""Big blobs: the page stays under 200 KB whatever the blob's size, and a `lines:` page
deep inside a text reads only the lines it shows."""

from __future__ import annotations

import pytest
from django.urls import reverse

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store
from core.content import Structured, Text
from core.store import FsBlobStore

pytestmark = pytest.mark.django_db

LIMIT = 200_000
LINES = 250_000  # about 20 MB


@pytest.fixture
def big_text(store: FsBlobStore):
    text = "".join(f"line {n:06} " + "lorem ipsum dolor sit amet " * 2 + "\n" for n in range(LINES))
    blob_id = store.store_sync(Text(text))
    assert store.size_sync(blob_id) > 16_000_000
    refresh_blob(blob_id, store=blob_store())
    return blob_id


def page(client, blob_id, selector=None, **params):
    query = {"selector": selector, **params} if selector else params
    return client.get(reverse("blob_detail", args=[blob_id]), query)


def test_the_page_of_a_20mb_text_stays_small(logged_in_client, big_text):
    response = page(logged_in_client, big_text)

    assert response.status_code == 200
    assert len(response.content) < LIMIT
    assert b'id="L500"' in response.content
    assert "lines 1–500 of 250,000".encode() in response.content


def test_lines_deep_inside_read_only_those_lines(logged_in_client, big_text, monkeypatch):
    def no_whole_loads(*args, **kwargs):
        raise AssertionError("the whole blob was loaded")

    monkeypatch.setattr(FsBlobStore, "load_sync", no_whole_loads)

    response = page(logged_in_client, big_text, "lines:249900-")

    assert response.status_code == 200
    assert len(response.content) < LIMIT
    assert (
        b'<span class="r" id="L249950"><a class="ln" href="#L249950" tabindex="-1">249950</a>'
        b"line 249949 "
    ) in response.content
    assert "lines 249,900–250,000 of 250,000".encode() in response.content


def test_a_single_20mb_line_is_cut(logged_in_client, store):
    blob_id = store.store_sync(Text("z" * 20_000_000))
    refresh_blob(blob_id, store=blob_store())

    response = page(logged_in_client, blob_id)

    assert len(response.content) < LIMIT
    assert b"19998000 more bytes" in response.content


def test_text_that_escapes_to_more_bytes_still_fits(logged_in_client, store):
    blob_id = store.store_sync(Text(('"<&>' * 500 + "\n") * 20_000))
    refresh_blob(blob_id, store=blob_store())

    response = page(logged_in_client, blob_id)

    assert len(response.content) < LIMIT
    assert b'rel="next"' in response.content


def test_many_grep_matches_are_paged(logged_in_client, big_text):
    response = page(logged_in_client, big_text, "grep:lorem")

    assert len(response.content) < LIMIT
    # A page of matches: the search stops there, and the next page goes on after it.
    assert "500 matches in lines 1–500 of 250,000; more follow".encode() in response.content
    assert b"?selector=lines%3A501-+%7C+grep%3Alorem" in response.content

    # The next page greps on from the first match not shown, as inspect continues.
    response = page(logged_in_client, big_text, "lines:249801- | grep:lorem")
    assert len(response.content) < LIMIT
    assert "200 matches in lines 249,801–250,000 of 250,000".encode() in response.content


def test_a_big_json_array_is_paged(logged_in_client, store):
    blob_id = store.store_sync(Structured([{"n": n, "text": "é" * 40} for n in range(100_000)]))
    refresh_blob(blob_id, store=blob_store())

    response = page(logged_in_client, blob_id)
    assert len(response.content) < LIMIT

    response = page(logged_in_client, blob_id, "slice:99990..")
    assert len(response.content) < LIMIT
    assert b"entries 99990..100000 of 100,000" in response.content


@pytest.mark.parametrize("char", ["€", "\U0001f600"], ids=["euro", "emoji"])
def test_text_of_multibyte_characters_still_fits(logged_in_client, store, char):
    # Lines just under LINE_BYTES in UTF-8, so none is cut: a budget that counted
    # characters let three or four times the bytes onto the page.
    line = char * (2_000 // len(char.encode()))
    blob_id = store.store_sync(Text((line + "\n") * 5_000))
    refresh_blob(blob_id, store=blob_store())
    url = reverse("blob_detail", args=[blob_id])

    full = logged_in_client.get(url)
    fragment = logged_in_client.get(url, headers={"HX-Request": "true"})

    assert len(full.content) < LIMIT
    assert len(fragment.content) < LIMIT
    assert line.encode() in fragment.content  # whole lines, not cut ones
    assert b'rel="next"' in full.content
