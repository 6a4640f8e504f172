"""`/sessions/<uuid>/`: a run as a timeline; blobs open in place."""

from __future__ import annotations

import re
import uuid
from html import unescape as html_unescape

import pytest
from django.core.management import call_command
from django.urls import reverse

from blobviewer.models import Item, Session
from blobviewer.timeline.paging import PAGE_LIMIT
from blobviewer.timeline.previews import PREVIEW_BYTES
from blobviewer.timeline.steps import StepFilter
from blobviewer.timeline.timeline import Timeline
from web.records import header, user_item

ITEMS_PER_PAGE = 100  # sessions of this many items need more than one page

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def timeline(client, session_id: uuid.UUID) -> str:
    return client.get(reverse("session_detail", args=[session_id])).content.decode()


def test_it_shows_the_run_as_a_timeline(logged_in_client, sample_session):
    response = logged_in_client.get(reverse("session_detail", args=[sample_session.id]))

    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Fix the build</h1>" in html
    assert html.count('<article class="item message user"') == 1
    # Four assistant turns, and whoami's result, whose call the log did not record.
    assert html.count('<article class="turn') == 5
    assert html.count('<article class="turn orphan') == 1
    assert html.count('<section class="step') == 4
    assert "The build is failing; find out why." in html
    assert '<code class="tool">run_build</code>' in html


def test_it_links_each_blob_reference_to_the_blob_opening_in_place(
    logged_in_client, sample_session
):
    html = logged_in_client.get(
        reverse("session_detail", args=[sample_session.id])
    ).content.decode()

    blob_url = reverse("blob_detail", args=[sample_session.text_blob])
    link = re.search(rf'<a class="blob-ref" href="{blob_url}"[^>]*>([^<]*)</a>', html)
    assert link, "the summary's [blob:<id>] is a link"
    assert link.group(1) == f"[blob:{sample_session.text_blob}]"
    assert f'hx-get="{blob_url}"' in link.group(0)
    assert 'hx-target="#item-3-blob"' in link.group(0)
    assert 'hx-swap="outerHTML"' in link.group(0)
    assert "hx-push-url" not in link.group(0)
    assert '<div class="blob-slot" id="item-3-blob"></div>' in html


def test_it_links_an_inspect_call_to_the_view_the_model_got(logged_in_client, sample_session):
    html = logged_in_client.get(
        reverse("session_detail", args=[sample_session.id])
    ).content.decode()

    # In place, the call opens what the model got (the result item's own output)...
    target = reverse("item_detail", args=[sample_session.id, 5])
    link = re.search(r'<a class="inspect-link"[^>]*>', html).group(0)
    assert f'href="{target}"' in link and f'hx-get="{target}"' in link
    assert 'hx-target="#item-5-blob"' in link
    # ...beside a link to the reader at the call's selector.
    reader = reverse("blob_detail", args=[sample_session.text_blob]) + "?selector=lines%3A2-3"
    assert f'<a class="reader-link" href="{reader}">open in the reader</a>' in html


def test_it_marks_references_to_missing_blobs(logged_in_client, write_log):
    from django.core.management import call_command

    from web.records import header, tool_result_item

    absent = uuid.UUID("01900000-0000-7000-8000-000000000010")
    session_id = uuid.uuid4()
    path = write_log([header(session_id), tool_result_item(1, f"[blob:{absent}] text | 2 lines")])
    call_command("ingest", str(path))

    html = logged_in_client.get(reverse("session_detail", args=[session_id])).content.decode()

    assert 'class="blob-ref missing"' in html


def test_it_answers_htmx_with_the_timeline_fragment(logged_in_client, sample_session):
    url = reverse("session_detail", args=[sample_session.id])

    html = logged_in_client.get(url, headers=HTMX).content.decode()

    assert html.lstrip().startswith('<div id="timeline-body" class="timeline-body">')
    assert '<div id="timeline" class="timeline">' in html and '<aside class="outline"' in html
    assert "<h1>" not in html and "<svg" not in html


def test_it_pages_a_long_session(logged_in_client):
    session = Session.objects.create(id=uuid.uuid4(), title="long", created_at="2025-01-01T00:00Z")
    count = 2 * ITEMS_PER_PAGE + 10
    Item.objects.bulk_create(
        Item(session=session, seq=n, type="user", text=f"message number {n}")
        for n in range(1, count + 1)
    )
    url = reverse("session_detail", args=[session.id])
    pages = Timeline(session, StepFilter()).layout.page_count
    assert pages > 1

    shown = []
    for number in range(1, pages + 1):
        headers = HTMX if number == pages else {}
        html = logged_in_client.get(url, {"page": number}, headers=headers).content.decode()
        assert f"page {number} of {pages}" in html
        shown += [int(n) for n in re.findall(r">message number (\d+)<", html)]
    assert shown == list(range(1, count + 1))
    assert 'hx-target="#timeline-body"' in html


def test_it_cuts_an_enormous_item_text(logged_in_client, write_log):
    session_id = uuid.uuid4()
    call_command("ingest", str(write_log([header(session_id), user_item(1, "y" * 100_000)])))

    response = logged_in_client.get(reverse("session_detail", args=[session_id]))

    shown = PREVIEW_BYTES
    assert f'<pre class="item-text">{"y" * shown}</pre>'.encode() in response.content
    assert f"{100_000 - shown:,} more bytes".encode() in response.content
    assert len(response.content) < 10_000


BIG_ITEM = ("plain text, " + "€uro & <tags> " * 4 + "\n") * 400  # about 30 KB


@pytest.fixture
def big_items_session(write_log, text_blob) -> tuple[uuid.UUID, uuid.UUID]:
    """A session of ITEMS_PER_PAGE user items of 30 KB each, each starting with a blob."""
    blob_id = text_blob("the blob\n")
    session_id = uuid.uuid4()
    items = [user_item(n, f"see [blob:{blob_id}] {BIG_ITEM}") for n in range(1, ITEMS_PER_PAGE + 1)]
    call_command("ingest", str(write_log([header(session_id), *items])))
    return session_id, blob_id


def test_a_page_of_big_items_stays_small_and_keeps_its_blob_links(
    logged_in_client, big_items_session
):
    session_id, blob_id = big_items_session
    assert len(BIG_ITEM.encode()) > 30_000
    url = reverse("session_detail", args=[session_id])
    blob_url = reverse("blob_detail", args=[blob_id])
    pages = Timeline(Session.objects.get(id=session_id), StepFilter()).layout.page_count

    linked = []
    for number in range(1, pages + 1):
        for headers in ({}, HTMX):
            html = logged_in_client.get(url, {"page": number}, headers=headers).content.decode()

            assert len(html.encode()) < PAGE_LIMIT
            links = re.findall(
                rf'<a class="blob-ref" href="{blob_url}" hx-get="{blob_url}"[^>]*>', html
            )
            seqs = re.findall(r'<article class="item message user" id="item-(\d+)"', html)
            assert len(links) == len(seqs) > 0
            assert f'hx-target="#item-{seqs[-1]}-blob"' in links[-1]
            assert f'<div class="blob-slot" id="item-{seqs[-1]}-blob"></div>' in html
            assert "&lt;tags&gt;" in html and "<tags>" not in html
        linked += seqs
    assert linked == [str(n) for n in range(1, ITEMS_PER_PAGE + 1)]


def test_a_cut_item_says_how_much_is_left_and_links_to_the_whole_item(
    logged_in_client, big_items_session
):
    session_id, _ = big_items_session

    html = logged_in_client.get(reverse("session_detail", args=[session_id])).content.decode()

    item_url = reverse("item_detail", args=[session_id, 7])
    article = html[html.index('id="item-7"') : html.index('id="item-8"')]
    more = re.search(r"… ([\d,]+) more bytes — <a ([^>]*)>open the item</a>", article)
    assert more, article[-600:]
    shown = re.search(r'<pre class="item-text">(.*?)</pre>', article, re.S).group(1)
    whole = len(f"see [blob:{uuid.UUID(int=0)}] {BIG_ITEM}".encode())
    shown = html_unescape(re.sub(r"<[^>]+>", "", shown))
    assert int(more.group(1).replace(",", "")) == whole - len(shown.encode())
    assert f'href="{item_url}"' in more.group(2) and f'hx-get="{item_url}"' in more.group(2)
    assert 'hx-target="#item-7"' in more.group(2) and 'hx-swap="outerHTML"' in more.group(2)


def test_the_item_page_shows_the_whole_item_escaped(logged_in_client, big_items_session):
    session_id, blob_id = big_items_session
    url = reverse("item_detail", args=[session_id, 7])

    page = logged_in_client.get(url)
    fragment = logged_in_client.get(url, headers=HTMX)

    assert page.status_code == fragment.status_code == 200
    whole = f"see [blob:{blob_id}] {BIG_ITEM}"
    for html in (page.content.decode(), fragment.content.decode()):
        shown = re.search(r'<pre class="item-text">(.*?)</pre>', html, re.S).group(1)
        assert html_unescape(re.sub(r"<[^>]+>", "", shown)) == whole
        assert "<tags>" not in html
        assert "more bytes" not in html
        assert f'hx-get="{reverse("blob_detail", args=[blob_id])}"' in html
        assert '<div class="blob-slot" id="item-7-blob"></div>' in html
    # The fragment replaces the cut item on the timeline: the article, nothing around it.
    assert (
        fragment.content.decode()
        .lstrip()
        .startswith('<article class="item message user" id="item-7"')
    )
    back = reverse("session_detail", args=[session_id]) + "#item-7"  # it is on the first page
    assert f'href="{back}"' in page.content.decode()


def test_the_item_page_links_back_to_the_timeline_page_that_holds_it(logged_in_client):
    session = Session.objects.create(id=uuid.uuid4(), title="long", created_at="2025-01-01T00:00Z")
    Item.objects.bulk_create(
        Item(session=session, seq=n * 2, type="user", text=f"m {n}" * 50)
        for n in range(1, ITEMS_PER_PAGE + 2)
    )
    last = 2 * (ITEMS_PER_PAGE + 1)
    number = Timeline(session, StepFilter()).layout.page_count
    assert number > 1

    html = logged_in_client.get(reverse("item_detail", args=[session.id, last])).content.decode()

    back = reverse("session_detail", args=[session.id]) + f"?page={number}#item-{last}"
    assert f'href="{back}"' in html
    timeline = logged_in_client.get(back).content.decode()
    assert f'id="item-{last}"' in timeline


def test_an_unknown_item_is_a_404(logged_in_client, sample_session):
    url = reverse("item_detail", args=[sample_session.id, 999])
    assert logged_in_client.get(url).status_code == 404
    assert logged_in_client.get(reverse("item_detail", args=[uuid.uuid4(), 1])).status_code == 404


def test_the_timeline_loads_only_the_start_of_each_text(logged_in_client, big_items_session):
    session_id, _ = big_items_session

    response = logged_in_client.get(reverse("session_detail", args=[session_id]))

    item = response.context["units"][0].item
    assert {"text", "output"} <= item.get_deferred_fields()
    # A referenced blob's row is small: its indexes live beside it in the store (core.store.index).
    assert item.blob_refs.all()[0].blob.get_deferred_fields() == set()


def test_the_timeline_cuts_each_calls_arguments_and_the_item_page_shows_them_whole(
    logged_in_client, write_log
):
    session_id = uuid.uuid4()
    calls = [
        {"id": f"c{n}", "name": f"tool_{n}", "arguments": {"n": n, "data": "<d>" * 5_000}}
        for n in range(1, 11)
    ]
    assistant = {"type": "assistant", "seq": 1, "text": "", "tool_calls": calls}
    call_command("ingest", str(write_log([header(session_id), assistant])))

    timeline = logged_in_client.get(reverse("session_detail", args=[session_id]))
    item = logged_in_client.get(reverse("item_detail", args=[session_id, 1]))

    html = timeline.content.decode()
    assert html.count('<code class="tool">tool_') == 10  # each call is a step
    assert html.count("no result recorded") == 10
    assert html.count("more bytes of arguments — <a") == 10
    assert len(timeline.content) < 60_000
    html = item.content.decode()
    assert html.count('<code class="tool">tool_') == 10
    assert "more bytes" not in html
    assert html.count("&lt;d&gt;" * 5_000) == 10


def test_it_answers_an_unknown_session_with_404(logged_in_client, db):
    response = logged_in_client.get(reverse("session_detail", args=[uuid.uuid4()]))
    assert response.status_code == 404


def test_it_needs_a_login(client, sample_session):
    response = client.get(reverse("session_detail", args=[sample_session.id]))
    assert response.status_code == 302
