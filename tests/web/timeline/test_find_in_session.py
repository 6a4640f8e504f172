"""Find in this session: the box on a session's page finds text in every item and inside
every blob of the session, counts the hits and steps through them, each opening its step
(the right timeline page, at its anchor) and, for a blob, the blob's page at the hit."""

from __future__ import annotations

import json
import re
import uuid
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Item
from core.store.blob_id import BLOB_REF
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def big_output(middle: str) -> str:
    lines = [f"line {n}: all good" for n in range(1, 301)]
    lines[150] = middle
    return "\n".join(lines) + "\n"


@pytest.fixture
def session_id(data_dir) -> uuid.UUID:
    """Hits for "walrus": in item 1's text, inside the blob of item 3, in item 5's output."""
    session_id = uuid.uuid4()
    records = [
        user_item(1, "Find the Walrus."),
        user_item(2, "nothing here"),
        tool_result_item(3, big_output("ERROR: walrus not found in zoo.db"), tool="query"),
        user_item(4, "still nothing"),
        tool_result_item(5, "the WALRUS is back", tool="look"),
    ]
    ingest_session(
        header(session_id, title="Zoo run"), records, source_path="t", store=blob_store()
    )
    return session_id


def find(client, session_id, q, hit=None, **headers):
    params = {"q": q} if hit is None else {"q": q, "hit": hit}
    return client.get(reverse("session_find", args=[session_id]), params, headers=headers)


def opened(response) -> tuple[str, dict[str, list[str]], str]:
    """Where a redirect goes: (path, query, anchor)."""
    assert response.status_code == 302
    url = urlsplit(response["Location"])
    return url.path, parse_qs(url.query), url.fragment


def box(html: str) -> str:
    return re.search(r'<section id="find-in-session".*?</section>', html, re.S).group(0)


def test_it_opens_each_hit_at_its_step_in_timeline_order(logged_in_client, session_id):
    page = reverse("session_detail", args=[session_id])

    assert opened(find(logged_in_client, session_id, "walrus")) == (
        page,
        {"find": ["walrus"], "hit": ["1"]},
        "item-1",
    )
    assert opened(find(logged_in_client, session_id, "walrus", 2))[2] == "step-3"
    assert opened(find(logged_in_client, session_id, "walrus", 3))[2] == "step-5"
    # Past the end: the last hit.
    assert opened(find(logged_in_client, session_id, "walrus", 99))[1]["hit"] == ["3"]


def test_the_session_page_shows_the_count_the_hit_and_its_links(logged_in_client, session_id):
    blob_id = BLOB_REF.match(Item.objects.get(session_id=session_id, seq=3).output).group(1)
    url = reverse("session_detail", args=[session_id])

    html = box(logged_in_client.get(url, {"find": "walrus", "hit": 2}).content.decode())

    assert "hit <strong>2</strong> of 3" in html
    assert 'value="walrus"' in html
    assert "text blob of #3 query" in html
    assert "ERROR: <mark>walrus</mark> not found in zoo.db" in html
    step = unescape(re.search(r'<a class="find-step" href="([^"]*)"', html).group(1))
    assert step == f"{url}?find=walrus&hit=2#step-3"
    blob = unescape(re.search(r'<a class="find-blob" href="([^"]*)"', html).group(1))
    assert blob == f"{reverse('blob_detail', args=[blob_id])}?selector=grep%3Awalrus"
    blob_page = re.sub(r"<[^>]+>", "", logged_in_client.get(blob).content.decode())
    assert "ERROR: walrus not found in zoo.db" in blob_page
    assert "line 1: all good" not in blob_page  # only the hit's line


def test_next_and_previous_step_through_the_hits_and_wrap_around(logged_in_client, session_id):
    url = reverse("session_detail", args=[session_id])
    html = box(logged_in_client.get(url, {"find": "walrus", "hit": 3}).content.decode())

    next_url = unescape(re.search(r'<a class="find-next" rel="next" href="([^"]*)"', html).group(1))
    prev_url = unescape(re.search(r'<a class="find-prev" rel="prev" href="([^"]*)"', html).group(1))

    assert opened(logged_in_client.get(next_url))[1]["hit"] == ["1"]  # after the last: the first
    assert opened(logged_in_client.get(prev_url))[1]["hit"] == ["2"]


def test_htmx_swaps_only_the_box_when_the_hit_is_on_the_page_on_screen(
    logged_in_client, session_id
):
    page = reverse("session_detail", args=[session_id])
    current = f"http://testserver{page}?find=walrus&hit=1"

    response = find(logged_in_client, session_id, "walrus", 2, **HTMX, HX_Current_URL=current)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.startswith('<section id="find-in-session"')
    assert "hit <strong>2</strong> of 3" in html
    assert response["HX-Push-Url"] == f"{page}?find=walrus&hit=2#step-3"
    assert response["HX-Reswap"] == "outerHTML show:#step-3:top"


def test_htmx_goes_to_another_page_when_the_hit_is_not_on_screen(logged_in_client, session_id):
    page = reverse("session_detail", args=[session_id])
    filtered = f"http://testserver{page}?errors=on"

    response = find(logged_in_client, session_id, "walrus", 2, **HTMX, HX_Current_URL=filtered)

    assert response["HX-Redirect"] == f"{page}?find=walrus&hit=2#step-3"
    assert response.content == b""


def test_it_says_when_nothing_is_found(logged_in_client, session_id):
    path, query, _ = opened(find(logged_in_client, session_id, "narwhal"))
    assert query == {"find": ["narwhal"]}

    html = box(logged_in_client.get(path, {"find": "narwhal"}).content.decode())
    assert "No hits for “narwhal”." in html


def test_it_needs_three_characters(logged_in_client, session_id):
    url = reverse("session_detail", args=[session_id])

    html = box(logged_in_client.get(url, {"find": "wa"}).content.decode())

    assert "Type 3 characters or more to find text in this session." in html


def test_it_finds_only_in_this_session(logged_in_client, session_id):
    other = uuid.uuid4()
    ingest_session(
        header(other, title="Other"),
        [user_item(1, "a walrus elsewhere")],
        source_path="t",
        store=blob_store(),
    )

    html = box(
        logged_in_client.get(
            reverse("session_detail", args=[session_id]), {"find": "walrus"}
        ).content.decode()
    )

    assert "of 3" in html


def test_the_empty_box_costs_no_search(logged_in_client, session_id):
    url = reverse("session_detail", args=[session_id])
    with CaptureQueriesContext(connection) as queries:
        html = logged_in_client.get(url).content.decode()

    assert not [q for q in queries if "searchchunk" in q["sql"]]

    found = box(html)
    assert f'action="{reverse("session_find", args=[session_id])}"' in found
    assert "hit <strong>" not in found and "No hits" not in found


def test_the_query_is_escaped_in_the_box(logged_in_client, session_id):
    url = reverse("session_detail", args=[session_id])

    html = box(logged_in_client.get(url, {"find": '"><script>x</script>'}).content.decode())

    assert "<script>" not in html
    assert 'value="&quot;&gt;&lt;script&gt;x&lt;/script&gt;"' in html


def test_an_unknown_session_is_a_404(logged_in_client, db):
    assert find(logged_in_client, uuid.uuid4(), "walrus").status_code == 404


def test_without_a_query_it_goes_back_to_the_session(logged_in_client, session_id):
    response = find(logged_in_client, session_id, "  ")

    assert opened(response) == (reverse("session_detail", args=[session_id]), {}, "")


def test_a_hit_in_a_json_blob_links_to_the_entry_that_holds_it(logged_in_client, data_dir):
    session_id = uuid.uuid4()
    rows = [{"id": n, "animal": "zebra" if n == 7 else "cat"} for n in range(30)]
    ingest_session(
        header(session_id, title="Animals"),
        [tool_result_item(1, json.dumps(rows), tool="list_animals")],
        source_path="t",
        store=blob_store(),
    )
    blob_id = BLOB_REF.match(Item.objects.get(session_id=session_id, seq=1).output).group(1)
    url = reverse("session_detail", args=[session_id])

    html = box(logged_in_client.get(url, {"find": "zebra"}).content.decode())

    assert "json array blob of #1 list_animals" in html
    blob = unescape(re.search(r'<a class="find-blob" href="([^"]*)"', html).group(1))
    assert blob == f"{reverse('blob_detail', args=[blob_id])}?selector=slice%3A7..8"


def test_the_box_closes_to_the_page_it_is_on(logged_in_client, session_id):
    url = reverse("session_detail", args=[session_id])

    html = box(logged_in_client.get(url, {"find": "walrus", "hit": 2}).content.decode())

    close = unescape(re.search(r'<a class="find-close" href="([^"]*)"', html).group(1))
    assert close == url
    assert 'class="find-box active"' in html
    assert 'class="find-box"' in box(logged_in_client.get(url).content.decode())
