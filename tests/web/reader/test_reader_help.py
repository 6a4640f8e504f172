"""Selector help below the box, fitted to the blob: the selectors its kind takes, with
examples built from the blob itself, clickable; an object's keys as completions (at most
200, then a hint to page them with keys:), read without loading a big blob."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from blobviewer.catalog import blobs as catalog
from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store
from blobviewer.reader.selector_help import COMPLETIONS
from core.content import Structured
from core.selectors import parse_selector
from core.store import FsBlobStore

pytestmark = pytest.mark.django_db


def page(client, blob_id, selector=None) -> str:
    query = {"selector": selector} if selector else {}
    return client.get(reverse("blob_detail", args=[blob_id]), query).content.decode()


def examples(html: str) -> list[str]:
    """The selectors the help offers, in order, as their links open them."""
    help_box = re.search(r'<div class="selector-help".*?</div>', html, re.S)
    assert help_box, "no selector help"
    hrefs = re.findall(r'<li><a href="([^"]+)"><code>', help_box.group(0))
    return [parse_qs(urlsplit(h.replace("&amp;", "&")).query)["selector"][0] for h in hrefs]


def completions(html: str) -> list[str]:
    datalist = re.search(r'<datalist id="blob-view-keys">(.*?)</datalist>', html, re.S)
    return re.findall(r'<option value="([^"]*)">', datalist.group(1)) if datalist else []


def test_a_text_gets_lines_and_grep_built_from_its_line_count(logged_in_client, text_blob):
    blob_id = text_blob("".join(f"line {n}\n" for n in range(1, 1_235)))

    offered = examples(page(logged_in_client, blob_id))

    assert offered == [
        "lines:1-40",
        "lines:1195-1234",
        "grep:(?i)error",
        "lines:1-1000 | grep:TODO",
    ]


def test_a_short_text_is_offered_what_it_has(logged_in_client, text_blob):
    blob_id = text_blob("a\nb\nc\n")

    assert examples(page(logged_in_client, blob_id)) == ["lines:1-3", "grep:(?i)error"]


def test_an_array_gets_slices_built_from_its_length(logged_in_client, json_blob):
    blob_id = json_blob(list(range(120)))

    offered = examples(page(logged_in_client, blob_id))

    assert offered == ["slice:0..10", "slice:110..120", "slice:60..61"]


def test_an_array_of_objects_also_gets_the_key_of_every_entry(
    logged_in_client, json_blob, monkeypatch
):
    small = json_blob([{"login": f"u{n}", "id": n} for n in range(30)])
    assert examples(page(logged_in_client, small))[-1] == "key:login"
    assert examples(page(logged_in_client, json_blob([1, {"a": 1}])))[-1] == "slice:1..2"

    # A big one's first entry is read from its rendering, never the blob whole.
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 1_000)
    monkeypatch.setattr("blobviewer.reader.blob_page.SMALL_JSON", 1_000)
    big = json_blob([{"id": n, "name": "x" * 100} for n in range(300)])
    refresh_blob(big, store=blob_store())
    assert examples(page(logged_in_client, big, "slice:5..9"))[-1] == "key:id"
    monkeypatch.setattr(FsBlobStore, "load_sync", None)  # a load would fail
    assert examples(page(logged_in_client, big))[-1] == "key:id"


def test_an_object_gets_its_own_keys(logged_in_client, json_blob):
    blob_id = json_blob(
        {"status": "ok", "items": [1, 2, 3], "log": "x\n" * 50, "meta": {"a": 1}, "more": [1]}
    )

    html = page(logged_in_client, blob_id)

    assert examples(html) == [
        "key:status",
        "key:items | slice:0..10",
        "key:log | lines:1-40",
        "key:meta | keys:0..50",
        "keys:0..5",
    ]
    assert "the value of status (string(2))" in html
    assert completions(html) == ["key:status", "key:items", "key:log", "key:meta", "key:more"]
    assert 'list="blob-view-keys"' in html


def test_every_example_is_a_selector_that_fits_its_blob(logged_in_client, json_blob, text_blob):
    blobs = [
        text_blob("".join(f"line {n}\n" for n in range(100))),
        json_blob([{"n": n} for n in range(30)]),
        json_blob({"a b": [1], "c|d": "x", " e": {"f": 1}}),
    ]
    for blob_id in blobs:
        for selector in examples(page(logged_in_client, blob_id)):
            parse_selector(selector)
            response = logged_in_client.get(
                reverse("blob_detail", args=[blob_id]), {"selector": selector}
            )
            assert response.status_code == 200, selector


def test_completions_stop_at_200_and_say_how_to_list_the_rest(logged_in_client, json_blob):
    blob_id = json_blob({f"key_{n:03}": n for n in range(450)})

    html = page(logged_in_client, blob_id)

    offered = completions(html)
    assert len(offered) == COMPLETIONS == 200
    assert offered[0] == "key:key_000" and offered[-1] == "key:key_199"
    hint = re.search(r'<p class="note keys-more">(.*?)</p>', html, re.S).group(1)
    assert "This object has 450 keys" in hint and "the first 200" in hint
    assert "?selector=keys%3A200..400" in hint


def test_a_big_object_offers_the_keys_of_its_rendering_without_loading_it(
    logged_in_client, json_blob, monkeypatch
):
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 1_000)
    monkeypatch.setattr("blobviewer.reader.blob_page.SMALL_JSON", 1_000)
    blob_id = json_blob({f"k{n}": {"v": [n] * 10} for n in range(300)})
    refresh_blob(blob_id, store=blob_store())

    def no_whole_loads(*args, **kwargs):
        raise AssertionError("the whole blob was loaded")

    monkeypatch.setattr(FsBlobStore, "load_sync", no_whole_loads)
    html = page(logged_in_client, blob_id)

    assert completions(html)[:3] == ["key:k0", "key:k1", "key:k2"]
    assert len(completions(html)) == 200
    assert "This object has 300 keys" in html


def test_a_hostile_key_is_escaped_in_the_help_and_the_completions(logged_in_client, json_blob):
    hostile = '"><script>alert(1)</script>'
    blob_id = json_blob({hostile: [1, 2]})

    html = page(logged_in_client, blob_id)

    assert "<script>alert" not in html
    assert completions(html) == [
        "key:&quot;\\&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&quot;"
    ]


def test_a_number_says_no_selector_applies(logged_in_client, json_blob):
    blob_id = json_blob(42)

    html = page(logged_in_client, blob_id)

    assert "this blob is a single number: no selector applies" in html
    assert "a number" in html  # its position: the whole value


def test_the_help_links_swap_the_view_with_htmx(logged_in_client, text_blob):
    blob_id = text_blob("a\n" * 100)

    html = page(logged_in_client, blob_id)

    box = re.search(r'<div class="selector-help"[^>]*>', html).group(0)
    assert 'hx-boost="true"' in box and 'hx-target="#blob-view"' in box


def test_a_big_object_without_its_rendering_offers_the_keys_of_the_page_it_read(
    logged_in_client, store, monkeypatch
):
    monkeypatch.setattr("blobviewer.reader.blob_page.SMALL_JSON", 10)
    blob_id = store.store_sync(Structured({"alpha": 1, "beta": [2]}))  # not indexed, no rendering

    assert completions(page(logged_in_client, blob_id)) == ["key:alpha", "key:beta"]
