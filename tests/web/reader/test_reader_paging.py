"""The reader's pages: first, previous, next and last for `lines:`, `slice:` and `keys:`
windows of the same size; grep forward by its continuation and back to its first page;
raw JSON row by row; a view that shows everything says so."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from blobviewer.catalog import blobs as catalog
from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store
from blobviewer.reader.display import LINES_PER_PAGE
from core.store import FsBlobStore

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def get(client, blob_id, selector=None, **params):
    query = {"selector": selector, **params} if selector is not None else params
    return client.get(reverse("blob_detail", args=[blob_id]), query)


def pager(html: str) -> dict[str, dict[str, list[str]] | None]:
    """The top pager's links as their queries, by rel; None for a step that is disabled."""
    nav = re.search(r'<nav class="pager top"[^>]*>(.*?)</nav>', html, re.S)
    assert nav, "no pager"
    links: dict[str, dict[str, list[str]] | None] = {}
    for rel, label in (
        ("first", "« first"),
        ("prev", "‹ previous"),
        ("next", "next ›"),
        ("last", "last »"),
    ):
        link = re.search(rf'<a href="([^"]+)"[^>]*rel="{rel}"', nav.group(1))
        if link:
            links[rel] = parse_qs(urlsplit(link.group(1).replace("&amp;", "&")).query)
        elif label in nav.group(1):
            links[rel] = None
    return links


def selectors(html: str) -> dict[str, str | None]:
    return {
        rel: (query or {}).get("selector", [""])[0] if query is not None else None
        for rel, query in pager(html).items()
    }


def position(html: str) -> str:
    caption = re.search(r'<p class="caption">(.*?)</p>', html, re.S)
    assert caption
    return re.sub(r"<[^>]+>", "", caption.group(1))


def test_a_lines_window_pages_by_windows_of_its_size(logged_in_client, text_blob):
    blob_id = text_blob("".join(f"line {n}\n" for n in range(1, 101)))

    html = get(logged_in_client, blob_id, "lines:20-45").content.decode()

    assert position(html).startswith("lines 20–45 of 100")
    assert selectors(html) == {
        "first": "lines:1-26",
        "prev": "lines:1-26",
        "next": "lines:46-71",
        "last": "lines:75-100",
    }


def test_the_first_and_last_windows_have_no_page_before_or_after(logged_in_client, text_blob):
    blob_id = text_blob("".join(f"line {n}\n" for n in range(1, 101)))

    first = selectors(get(logged_in_client, blob_id, "lines:1-30").content.decode())
    last = selectors(get(logged_in_client, blob_id, "lines:71-100").content.decode())

    assert first == {"first": None, "prev": None, "next": "lines:31-60", "last": "lines:71-100"}
    assert last == {"first": "lines:1-30", "prev": "lines:41-70", "next": None, "last": None}


def test_a_text_without_a_selector_pages_by_what_fits(logged_in_client, text_blob):
    blob_id = text_blob("".join(f"line {n}\n" for n in range(1, 1_201)))

    html = get(logged_in_client, blob_id).content.decode()

    assert position(html).startswith(f"lines 1–{LINES_PER_PAGE} of 1,200")
    assert selectors(html)["next"] == f"lines:{LINES_PER_PAGE + 1}-{2 * LINES_PER_PAGE}"
    assert selectors(html)["last"] == f"lines:{1_200 - LINES_PER_PAGE + 1}-1200"


def test_lines_within_a_string_keep_the_steps_before_them(logged_in_client, json_blob):
    blob_id = json_blob({"log": "".join(f"entry {n}\n" for n in range(1, 51))})

    html = get(logged_in_client, blob_id, "key:log | lines:11-20").content.decode()

    assert position(html).startswith("lines 11–20 of 50")
    assert selectors(html)["next"] == "key:log | lines:21-30"
    assert selectors(html)["prev"] == "key:log | lines:1-10"


def test_a_view_that_shows_everything_says_so(logged_in_client, text_blob):
    blob_id = text_blob("one\ntwo\nthree\n")

    html = get(logged_in_client, blob_id).content.decode()

    assert position(html) == "lines 1–3 of 3 · all of it is shown"
    assert '<nav class="pager' not in html


def test_a_slice_pages_by_windows_of_as_many_entries(logged_in_client, json_blob):
    blob_id = json_blob({"items": [{"n": n} for n in range(100)]})

    html = get(logged_in_client, blob_id, "key:items | slice:30..40").content.decode()

    assert position(html).startswith("entries 30..40 of 100")
    assert selectors(html) == {
        "first": "key:items | slice:0..10",
        "prev": "key:items | slice:20..30",
        "next": "key:items | slice:40..50",
        "last": "key:items | slice:90..100",
    }


def test_keys_page_by_windows_of_as_many_keys(logged_in_client, json_blob):
    blob_id = json_blob({f"k{n:02}": n for n in range(50)})

    html = get(logged_in_client, blob_id, "keys:10..20").content.decode()

    assert position(html).startswith("keys 10..20 of 50")
    assert selectors(html) == {
        "first": "keys:0..10",
        "prev": "keys:0..10",
        "next": "keys:20..30",
        "last": "keys:40..50",
    }
    # Each key line links to its value.
    assert "?selector=key%3Ak10" in html and "?selector=key%3Ak20" not in html


def test_a_whole_array_whose_tree_stops_short_goes_on_with_slices(logged_in_client, json_blob):
    blob_id = json_blob([{"n": n, "text": "x" * 300} for n in range(2_000)])

    html = get(logged_in_client, blob_id).content.decode()

    match = re.match(r"entries 0\.\.(\d+) of 2,000", position(html))
    assert match
    shown = int(match.group(1))
    assert 0 < shown < 2_000
    assert selectors(html)["next"] == f"slice:{shown}..{2 * shown}"
    assert selectors(html)["last"] == f"slice:{2_000 - shown}..2000"
    assert "next page ›" in html  # the tree's own end says where it goes on


def test_grep_goes_on_from_the_first_match_not_shown(logged_in_client, text_blob):
    blob_id = text_blob("".join(f"hit {n}\n" for n in range(1, 1_201)))

    html = get(logged_in_client, blob_id, "grep:hit").content.decode()
    shown = [int(n) for n in re.findall(r'tabindex="-1">(\d+)</a><mark>hit</mark>', html)]
    links = selectors(html)

    assert shown[0] == 1 and shown == list(range(1, len(shown) + 1))
    assert links == {"first": None, "next": f"lines:{shown[-1] + 1}- | grep:hit"}
    assert "prev" not in links and "last" not in links  # grep has neither

    html = get(logged_in_client, blob_id, links["next"]).content.decode()
    assert re.findall(r'tabindex="-1">(\d+)</a><mark>hit</mark>', html)[0] == str(shown[-1] + 1)
    assert selectors(html)["first"] == "grep:hit"


def test_grep_keeps_the_end_of_the_lines_it_searches(logged_in_client, text_blob):
    blob_id = text_blob("".join(f"hit {n}\n" for n in range(1, 2_001)))

    html = get(logged_in_client, blob_id, "lines:101-1500 | grep:hit").content.decode()

    links = selectors(html)
    assert re.fullmatch(r"lines:\d+-1500 \| grep:hit", links["next"] or "")
    assert links["first"] == "lines:1-1500 | grep:hit"


def test_a_grep_with_no_hits_says_so(logged_in_client, text_blob):
    blob_id = text_blob("alpha\nbeta\n")

    html = get(logged_in_client, blob_id, "grep:gamma").content.decode()

    assert '<p class="empty no-match">no lines match gamma in lines 1–2 of 2</p>' in html
    assert '<pre class="content grep' not in html


def test_raw_json_goes_on_row_by_row(logged_in_client, json_blob):
    blob_id = json_blob(list(range(2_000)))

    html = get(logged_in_client, blob_id, **{"as": "raw"}).content.decode()

    links = pager(html)
    assert position(html).startswith(f"JSON lines 1–{LINES_PER_PAGE} of 2,002")
    assert links["next"] == {"start": [str(LINES_PER_PAGE + 1)], "as": ["raw"]}
    assert links["last"] == {"start": [str(2_002 - LINES_PER_PAGE + 1)], "as": ["raw"]}


def test_a_raw_slice_pages_by_slices_and_its_rows(logged_in_client, json_blob):
    blob_id = json_blob([{"n": n, "lines": list(range(80))} for n in range(30)])

    html = get(logged_in_client, blob_id, "slice:0..10", **{"as": "raw"}).content.decode()

    assert selectors(html)["next"] == "slice:10..20"
    rows = re.search(r'<nav class="pager rows"[^>]*>(.*?)</nav>', html, re.S)
    assert rows and "start=" in rows.group(1) and "as=raw" in rows.group(1)


def test_the_first_page_of_a_big_json_array_comes_from_its_rendering(
    logged_in_client, json_blob, monkeypatch
):
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 1_000)
    blob_id = json_blob([{"n": n} for n in range(5_000)])
    refresh_blob(blob_id, store=blob_store())

    def no_whole_loads(*args, **kwargs):
        raise AssertionError("the whole blob was loaded")

    monkeypatch.setattr(FsBlobStore, "load_sync", no_whole_loads)
    html = get(logged_in_client, blob_id).content.decode()

    match = re.match(r"entries 0\.\.(\d+) of 5,000", position(html))
    assert match
    shown = int(match.group(1))
    assert selectors(html)["next"] == f"slice:{shown}..{2 * shown}"
    assert "?selector=slice%3A0..1" in html  # entry 0 links to its own slice


def test_pager_links_swap_the_view_in_place_of_itself(logged_in_client, text_blob):
    blob_id = text_blob("".join(f"line {n}\n" for n in range(1, 101)))

    html = get(logged_in_client, blob_id, "lines:1-10").content.decode()
    fragment = logged_in_client.get(
        reverse("blob_detail", args=[blob_id]),
        {"selector": "lines:1-10"},
        headers={**HTMX, "HX-Target": "item-4-blob"},
    ).content.decode()

    next_link = re.search(r'<a [^>]*rel="next"[^>]*>', html).group(0)
    assert 'hx-target="#blob-view"' in next_link and 'hx-push-url="true"' in next_link
    assert 'data-key="next"' in next_link  # what "]" follows
    in_place = re.search(r'<a [^>]*rel="next"[^>]*>', fragment).group(0)
    assert 'hx-target="#item-4-blob"' in in_place and 'hx-push-url="false"' in in_place
