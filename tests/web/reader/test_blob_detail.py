"""`/blobs/<uuid>/?selector=<sel>`: one blob, read with the model's selectors."""

from __future__ import annotations

import re
import uuid
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from blobviewer.models import Blob
from blobviewer.reader.display import LINES_PER_PAGE
from web.records import ISSUES

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["fs", "s3"])
def blob_backend(request: pytest.FixtureRequest) -> str:
    """Every test that uses the site's store runs on a folder and on object storage."""
    return request.param


HTMX = {"HX-Request": "true"}


def url(blob_id: uuid.UUID, selector: str | None = None, **params: str) -> str:
    query = {"selector": selector} if selector is not None else {}
    query.update(params)
    base = reverse("blob_detail", args=[blob_id])
    return f"{base}?{urlencode(query)}" if query else base


def test_it_shows_the_facts_and_the_first_lines_of_a_text_blob(logged_in_client, sample_session):
    response = logged_in_client.get(url(sample_session.text_blob))

    assert response.status_code == 200
    html = response.content.decode()
    assert "<dt>Kind</dt><dd>text</dd>" in html
    assert "300 lines" in html
    assert "12,084 bytes" in html
    assert "lines 1–300 of 300" in html
    assert (
        '<span class="r" id="L1"><a class="ln" href="#L1" tabindex="-1">1</a>'
        "step 1: compiling module_1.py ... ok\n</span>"
    ) in html
    assert 'id="L300"' in html
    # Referenced by the session that promoted it; links to raw and to sharing.
    assert sample_session.session.get_absolute_url() in html
    assert reverse("blob_raw", args=[sample_session.text_blob]) in html
    assert reverse("share_create", args=[sample_session.text_blob]) in html


def test_it_answers_htmx_with_the_view_fragment_only(logged_in_client, sample_session):
    response = logged_in_client.get(url(sample_session.text_blob, "lines:2-3"), headers=HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="blob-view"')
    assert "<html" not in html and "Referenced by" not in html
    assert "lines 2–3 of 300" in html
    assert 'id="L2"' in html and 'id="L4"' not in html
    assert "HX-Request" in response["Vary"]


def test_its_selector_form_swaps_the_view_and_pushes_the_url(logged_in_client, sample_session):
    html = logged_in_client.get(url(sample_session.text_blob)).content.decode()

    form = re.search(r'<form class="selector"[^>]*>', html).group(0)
    base = reverse("blob_detail", args=[sample_session.text_blob])
    assert f'action="{base}"' in form and f'hx-get="{base}"' in form
    assert 'hx-target="#blob-view"' in form
    assert 'hx-push-url="true"' in form


def test_it_pages_long_texts_with_lines_selectors(logged_in_client, text_blob):
    blob_id = text_blob("".join(f"line {n}\n" for n in range(1, 1201)))

    html = logged_in_client.get(url(blob_id)).content.decode()

    assert f"lines 1–{LINES_PER_PAGE} of 1,200" in html
    # The next page is a window as wide as the one shown.
    next_url = url(blob_id, f"lines:{LINES_PER_PAGE + 1}-{2 * LINES_PER_PAGE}")
    assert f'href="{next_url}"' in html.replace("&amp;", "&")
    assert f'id="L{LINES_PER_PAGE + 1}"' not in html

    html = logged_in_client.get(url(blob_id, "lines:1101-")).content.decode()
    assert "lines 1,101–1,200 of 1,200" in html
    assert url(blob_id, "lines:1001-1100") in html.replace("&amp;", "&")


def test_it_shows_json_indented_as_raw(logged_in_client, sample_session):
    response = logged_in_client.get(url(sample_session.json_blob, "slice:1..3", **{"as": "raw"}))

    html = response.content.decode()
    assert response.status_code == 200
    assert "entries 1..3 of 60" in html
    assert (
        '<span class="ln">2</span>  {\n</span><span class="r"><span class="ln">3</span>'
        "    &quot;id&quot;: 1,\n</span>"
    ) in html


def test_it_shows_a_key_holding_a_string_as_numbered_text(logged_in_client, json_blob):
    blob_id = json_blob({"log": "first\nsecond\nthird", "n": 1})

    html = logged_in_client.get(url(blob_id, "key:log")).content.decode()

    assert '<span class="r" id="L2"><a class="ln" href="#L2" tabindex="-1">2</a>second' in html


def test_it_shows_grep_matches_with_links_into_the_text(logged_in_client, sample_session):
    html = logged_in_client.get(
        url(sample_session.text_blob, "grep:module_7[0-9]\\.")
    ).content.decode()

    assert "10 matches in lines 1–300 of 300" in html
    target = url(sample_session.text_blob, "lines:60-560") + "#L70"
    row = f'<a class="ln" href="{target}" tabindex="-1">70</a>'
    assert row + "step 70: compiling <mark>module_70.</mark>" in html.replace("&amp;", "&")


def test_it_pages_raw_json_with_a_start_row(logged_in_client, json_blob):
    blob_id = json_blob(list(range(2000)))
    raw = {"as": "raw"}

    html = logged_in_client.get(url(blob_id, **raw)).content.decode()
    assert f"JSON lines 1–{LINES_PER_PAGE} of 2,002" in html
    assert url(blob_id, start=str(LINES_PER_PAGE + 1), **raw) in html.replace("&amp;", "&")

    html = logged_in_client.get(url(blob_id, start="2001", **raw)).content.decode()
    assert "JSON lines 2,001–2,002 of 2,002" in html


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("lines:abc", "lines: expects A-B"),
        ("slice:0..5", "slice: applies to a JSON array; this blob is text"),
        ("lines:999", "line 999 is past the end; the text has 300 lines"),
        ("grep:(", "grep: invalid regex"),
        ("bogus:1", "unknown selector"),
    ],
)
def test_it_answers_a_bad_selector_with_400_and_the_error_beside_the_box(
    logged_in_client, sample_session, selector, message
):
    for headers in ({}, HTMX):
        response = logged_in_client.get(url(sample_session.text_blob, selector), headers=headers)

        assert response.status_code == 400
        html = response.content.decode()
        error = re.search(r'<p class="error" id="blob-view-error" role="alert">([^<]*)</p>', html)
        assert error and message in error.group(1)
        assert 'aria-invalid="true"' in html
        assert f'value="{selector}"' in html.replace("&quot;", '"')


def test_it_answers_an_unknown_blob_with_the_404_page(logged_in_client, data_dir):
    response = logged_in_client.get(url(uuid.UUID("01900000-0000-7000-8000-0000000000ff")))

    assert response.status_code == 404
    assert b"Not found" in response.content
    assert b"No blob has this id" in response.content


@pytest.mark.parametrize(
    "bad_id", ["not-a-uuid", "01900000-0000-7000-8000-00000000000", "..%2F..%2Fetc"]
)
def test_it_answers_a_malformed_blob_id_with_404(logged_in_client, data_dir, bad_id):
    response = logged_in_client.get(f"/blobs/{bad_id}/")

    assert response.status_code == 404
    assert b"Not found" in response.content


def test_it_shows_a_referenced_blob_missing_from_the_store_as_missing(logged_in_client, write_log):
    from django.core.management import call_command

    from web.records import header, tool_result_item

    absent = uuid.UUID("01900000-0000-7000-8000-000000000002")
    call_command("ingest", str(write_log([header(), tool_result_item(1, f"[blob:{absent}] x")])))

    for headers in ({}, HTMX):
        response = logged_in_client.get(url(absent, "lines:1-2"), headers=headers)
        assert response.status_code == 200
        assert b"the store does not have it" in response.content


def test_it_picks_up_a_blob_that_reached_the_store_after_ingest(logged_in_client, write_raw_blob):
    blob_id = uuid.UUID("01900000-0000-7000-8000-000000000003")
    Blob.objects.create(id=blob_id, missing=True)
    write_raw_blob(f"{blob_id}.txt", b"now here\n")

    html = logged_in_client.get(url(blob_id)).content.decode()

    assert "now here" in html
    # Read through the store; the row is only brought up to date by `blobs index`.
    assert Blob.objects.get(id=blob_id).missing


def test_it_shows_a_damaged_blob_as_an_error_not_a_500(logged_in_client, write_raw_blob):
    blob_id = uuid.UUID("01900000-0000-7000-8000-000000000004")
    write_raw_blob(f"{blob_id}.json", b"[1, 2,")

    response = logged_in_client.get(url(blob_id))

    assert response.status_code == 200
    assert b"The store cannot read this blob" in response.content


def test_it_shows_a_text_blob_that_is_not_utf8_as_an_error(logged_in_client, write_raw_blob):
    blob_id = uuid.UUID("01900000-0000-7000-8000-000000000005")
    write_raw_blob(f"{blob_id}.txt", b"ok\n\xff\xfe broken\n")

    response = logged_in_client.get(url(blob_id))

    assert response.status_code == 200
    assert b"The store cannot read this blob" in response.content
    assert b"not UTF-8" in response.content


def test_it_opens_in_place_on_a_timeline_without_touching_the_address_bar(
    logged_in_client, sample_session
):
    headers = {**HTMX, "HX-Target": "item-3-blob"}

    html = logged_in_client.get(url(sample_session.text_blob), headers=headers).content.decode()

    assert html.lstrip().startswith('<section id="item-3-blob" class="blob-view in-place reader"')
    assert 'hx-target="#item-3-blob"' in html
    assert 'hx-push-url="false"' in html and 'hx-push-url="true"' not in html
    # Line anchors carry the reader's prefix, so several readers on a page stay unique.
    assert 'id="L1"' not in html
    assert 'id="item-3-blob-L1"' in html and 'href="#item-3-blob-L1"' in html
    assert "open on its own page" in html


def test_it_ignores_a_target_that_is_not_a_timeline_slot(logged_in_client, sample_session):
    headers = {**HTMX, "HX-Target": 'x" onmouseover="alert(1)'}

    html = logged_in_client.get(url(sample_session.text_blob), headers=headers).content.decode()

    assert html.lstrip().startswith('<section id="blob-view"')
    assert "onmouseover" not in html


def test_it_cuts_very_long_lines_with_a_note_and_a_raw_link(logged_in_client, text_blob):
    blob_id = text_blob("short\n" + "x" * 50_000 + "\nend\n")

    html = logged_in_client.get(url(blob_id)).content.decode()

    assert "x" * 2000 in html and "x" * 2001 not in html
    assert "… 48000 more bytes" in html
    assert "long lines are cut" in html
    assert reverse("blob_raw", args=[blob_id]) in html
    assert 'id="L3"' in html


def test_it_cuts_long_lines_in_a_selected_view_too(logged_in_client, json_blob):
    blob_id = json_blob({"big": "é" * 5000})

    html = logged_in_client.get(url(blob_id, "key:big")).content.decode()

    assert "é" * 1000 in html and "é" * 1001 not in html
    assert "… 8000 more bytes" in html


def test_it_needs_a_login(client, sample_session):
    response = client.get(url(sample_session.text_blob))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_shows_the_json_blob_facts(logged_in_client, sample_session):
    html = logged_in_client.get(url(sample_session.json_blob)).content.decode()

    assert "<dt>Kind</dt><dd>json_array</dd>" in html
    assert f"{len(ISSUES)} entries" in html
